package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The committed page is what the code says today: regenerate it (make generate) when this fails.
func TestCommittedPageIsUpToDate(t *testing.T) {
	page, problems, err := Generate(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", Output))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(page, committed) {
		t.Errorf("%s is stale: run make generate (or go run ./hack/docgen) and commit it", Output)
	}
}

// A tree with a reason written as a literal, one flowing through a helper and one never used.
func TestLiteralsHelpersAndUnusedReasons(t *testing.T) {
	root, write := treeWith(t, `
	// Broken: it broke.
	// Do: fix it.
	Broken Reason = "Broken"
	// Forgotten: nobody emits it.
	Forgotten Reason = "Forgotten"
	// Helped: set through a helper.
	Helped Reason = "Helped"
`)
	write("internal/controller/etcdcluster/c.go", `package etcdcluster
func f() {
	shared.SetCondition(&c.Status.Conditions, c.Generation, v1.ConditionDegraded, true, reason.Broken, "m")
	r.Recorder.Event(c, corev1.EventTypeWarning, "Literal", "m")
	degrade(reason.Helped)
}
func degrade(why reason.Reason) { shared.SetCondition(&c.Status.Conditions, c.Generation, v1.ConditionDegraded, true, why, "m") }
`)
	page, problems, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(problems, "\n")
	if !strings.Contains(all, `reason "Literal" is a string literal`) || !strings.Contains(all, "reason.Forgotten is documented but nothing emits it") || len(problems) != 2 {
		t.Errorf("problems:\n%s\nwant the literal and the unused reason", all)
	}
	for _, want := range []string{
		"| `Degraded` | True when broken. |",
		"| `Broken` | Degraded=True | it broke. | fix it. |",
		"| `Helped` | Degraded=True | set through a helper. |  |",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

// Conditions and warnings the planner decides, and a reason that reaches them through a struct
// field copied into the planner's input.
func TestPlannerConditionsAndCopiedFields(t *testing.T) {
	root, write := treeWith(t, `
	// Healthy: all is well.
	Healthy Reason = "Healthy"
	// Stepping: a step.
	Stepping Reason = "Stepping"
	// Distrusted: reaches Degraded through the controller's trust problem.
	Distrusted Reason = "Distrusted"
`)
	write("internal/controller/etcdcluster/c.go", `package etcdcluster
type trustProblem struct{ reason reason.Reason }
func f() *trustProblem { return &trustProblem{reason.Distrusted} }
func (p *pass) health() planner.Health { return planner.Health{Trust: &planner.Problem{Why: p.trust.reason}} }
`)
	write("internal/planner/p.go", `package planner
func decide() Action { return Action{Reason: reason.Stepping} }
func conditions(h Health) (Condition, Warning) {
	if h.Trust != nil {
		return clusterCondition(v1.ConditionDegraded, true, h.Trust.Why, "m"), clusterWarning(h.Trust.Why, "m")
	}
	return clusterCondition(v1.ConditionDegraded, false, reason.Healthy, "m"), Warning{}
}
`)
	page, problems, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("problems: %v", problems)
	}
	for _, want := range []string{
		"| `Healthy` | Degraded=False | all is well. |  |",
		"| `Stepping` | step (Progressing, Normal event) | a step. |  |",
		"| `Distrusted` | Degraded=True; Warning event |",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

// A condition set and a warning recorded through the shared helpers count for the kind of the
// package that calls them.
func TestSharedHelpersTakeTheCallersKind(t *testing.T) {
	root, write := treeWith(t, `
	// Flaky: a backup's warning.
	Flaky Reason = "Flaky"
`)
	write("internal/controller/etcdbackup/b.go", `package etcdbackup
func f() {
	shared.WarnOnTransition(r.Recorder, b, b.Status.Conditions, v1.ConditionDegraded, reason.Flaky, "m")
	shared.SetCondition(&b.Status.Conditions, b.Generation, v1.ConditionDegraded, false, reason.Flaky, "m")
}
`)
	page, problems, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("problems: %v", problems)
	}
	if want := "| `Flaky` | EtcdBackup Degraded=False; EtcdBackup Warning event | a backup's warning. |  |"; !strings.Contains(string(page), want) {
		t.Errorf("page lacks %q:\n%s", want, page)
	}
}

// A reason the controller reads from the planner's action shows up where its table of stops says:
// on the condition it holds False, with a Warning event, for the kind of the table's file. A table
// entry on what is no condition type, or on no reason constant, is a problem.
func TestStopTables(t *testing.T) {
	root, write := treeWith(t, "")
	write("internal/reason/cluster.go", `package reason
type Reason string
type Stop struct{ Condition string }
// Cluster things.
const (
	// Halted: the step halts.
	Halted Reason = "Halted"
	// Stuck: the step is stuck.
	Stuck Reason = "Stuck"
)
var Stops = map[Reason]Stop{
	Halted: {Condition: "Degraded"},
	Stuck:  {Condition: "None"},
	Gone:   {Condition: "Degraded"},
}
`)
	write("internal/planner/p.go", `package planner
func decide() Action { return Action{Reason: reason.Halted} }
func stuck() Action { return Action{Reason: reason.Stuck} }
`)
	page, problems, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"reason.Stuck stops on None, which is no condition type",
		"a table of stops names Gone, which is no reason constant of internal/reason/cluster.go",
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	for _, want := range []string{
		"| `Degraded` | True when broken. |",
		"| `Halted` | Degraded=False; Warning event; step (Progressing, Normal event) | the step halts. |  |",
		"| `Stuck` | step (Progressing, Normal event) | the step is stuck. |  |",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

// treeWith is a source tree under a temporary root: the cluster reasons reasons (constant
// declarations), the condition type Degraded, and every package docgen reads, empty; and what
// writes more files into it.
func treeWith(t *testing.T, reasons string) (string, func(path, src string)) {
	root := t.TempDir()
	write := writerIn(t, root)
	write("internal/reason/cluster.go", "package reason\ntype Reason string\n// Cluster things.\nconst ("+reasons+")\n")
	write("api/v1alpha1/types.go", `package v1alpha1
// ConditionDegraded is True when broken.
const ConditionDegraded = "Degraded"
`)
	write("internal/planner/p.go", "package planner\n")
	write("internal/backup/b.go", "package backup\n")
	for _, pkg := range []string{"etcdcluster", "etcdbackup", "etcdbackupschedule", "shared"} {
		write("internal/controller/"+pkg+"/doc.go", "package "+pkg+"\n")
	}
	return root, write
}

// writerIn writes files of a source tree under root.
func writerIn(t *testing.T, root string) func(path, src string) {
	return func(path, src string) {
		t.Helper()
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
