//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// quickstartPage is the page TestQuickstartPage follows, from this directory.
const quickstartPage = "../../docs/first-cluster.md"

// quickstartOutputs is what the page says its commands show: a command matching cmd must print
// (exit 0 and) output matching out; a background command (ending in " &") must print it before the
// next command runs, as a user waits for it. Each entry must match a command of the page, so that a
// rewritten page fails here instead of losing its check. Commands matching none must exit 0.
var quickstartOutputs = []struct{ cmd, out *regexp.Regexp }{
	{regexp.MustCompile(`^kubectl wait etcd/example --for=condition=Available\b`), regexp.MustCompile(`etcdcluster\S* condition met`)},
	// NAME REPLICAS READY ...: Available promises a healthy quorum and one member behind the client
	// Service, not every member's pod Ready (READY counts those): it can still be 1 right after
	{regexp.MustCompile(`^kubectl get etcd example *(#.*)?$`), regexp.MustCompile(`(?m)^example\s+3\s+[123]\s`)},
	{regexp.MustCompile(`^kubectl get etcd example -o jsonpath='\{\.status\.endpoints\}'$`), regexp.MustCompile(`"clientSecret":"example-client-tls"`)},
	{regexp.MustCompile(`^kubectl port-forward svc/example-client 23790:2379 &$`), regexp.MustCompile(`Forwarding from 127\.0\.0\.1:23790`)},
	{regexp.MustCompile(`^etcdctl .* put /hello world$`), regexp.MustCompile(`(?m)^OK$`)},
	// three members, each listed once it has started, or as unstarted until then (an ID is printed
	// in hexadecimal without leading zeros, padded to the column)
	{regexp.MustCompile(`^etcdctl .* member list -w table$`), regexp.MustCompile(`(?s)(\| +[0-9a-f]+ \| (started|unstarted) \|.*){3}`)},
	{regexp.MustCompile(`^kubectl describe etcd example\b`), regexp.MustCompile(`(?m)^\s+Type:\s+Available$`)},
	{regexp.MustCompile(`^kubectl etcd status example\b`), regexp.MustCompile(`(?m)^Ready:\s+[123] of 3 members`)},
	{regexp.MustCompile(`^kubectl delete etcd example$`), regexp.MustCompile(`etcdcluster\S* "example" deleted`)},
}

// Issue 33 item 6: the quickstart (docs/first-cluster.md) run as a user runs it, on the local cluster:
// every ```yaml block is saved as <metadata.name>.yaml and every line of every ```sh block is run by
// sh in that directory, in the page's order, unchanged, with kubectl, etcdctl and the kubectl-etcd
// plugin on PATH and a kubeconfig whose namespace is the test's (the one thing rewritten). Beyond the
// outputs of quickstartOutputs, the objects of the page's table ("What the operator made") must exist,
// owned by the EtcdCluster, once `kubectl wait` returns, and be gone after `kubectl delete`.
//
// Not checked: the EtcdBackupSchedule's nightly run (it is only applied: it starts at 02:00 and needs
// the page's MinIO at minio.minio.svc and its credentials Secret, which are the user's; scheduled
// backups to MinIO are backup_test.go's).
func TestQuickstartPage(t *testing.T) {
	framework.Parallel(t, 30*time.Second)
	raw, err := os.ReadFile(quickstartPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	steps := pageSteps(t, page)
	table := operatorObjects(t, page)
	t.Logf("%s: %d steps, %d objects in the table of what the operator made", quickstartPage, len(steps), len(table))
	for _, o := range quickstartOutputs {
		if !hasCommand(steps, o.cmd) {
			t.Fatalf("no command of %s matches %s: the page changed; update quickstartOutputs", quickstartPage, o.cmd)
		}
	}

	ns := env.NewNamespace(t, "e2e-quickstart-")
	env.StartOperator(t, ns, "")
	dir := t.TempDir()
	shell := userShell(t, dir, ns)
	start := time.Now()
	for _, s := range steps {
		if s.line == "" {
			if err := os.WriteFile(filepath.Join(dir, s.file), []byte(s.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		out := shell(s.line)
		t.Logf("%6.1fs $ %s\n%s", time.Since(start).Seconds(), s.line, out)
		switch {
		case strings.HasPrefix(s.line, "kubectl wait "):
			framework.WaitFor(t, "the table's objects, owned by the EtcdCluster", time.Minute, func() error {
				return tableMade(ns, table)
			})
		case strings.HasPrefix(s.line, "kubectl delete etcd "):
			framework.WaitFor(t, "the table's objects deleted with the EtcdCluster", 2*time.Minute, func() error {
				return tableGone(ns, table)
			})
		}
	}
	t.Logf("the page's %d steps in %.1fs", len(steps), time.Since(start).Seconds())
}

// pageStep is a ```yaml block (saved as file) or one command line of a ```sh block.
type pageStep struct {
	file, yaml string
	line       string
}

var pageFence = regexp.MustCompile("(?ms)^```(\\w*)\\n(.*?)^```")

// pageSteps are the page's yaml blocks and command lines in the page's order. Every yaml block must be
// applied by a command of the page (`-f <metadata.name>.yaml`): a manifest the page shows but never
// applies is one the user cannot follow.
func pageSteps(t *testing.T, page string) []pageStep {
	t.Helper()
	var steps []pageStep
	for _, m := range pageFence.FindAllStringSubmatch(page, -1) {
		switch m[1] {
		case "yaml":
			var meta struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(m[2]), &meta); err != nil || meta.Metadata.Name == "" {
				t.Fatalf("a yaml block of %s has no metadata.name (%v):\n%s", quickstartPage, err, m[2])
			}
			steps = append(steps, pageStep{file: meta.Metadata.Name + ".yaml", yaml: m[2]})
		case "sh":
			for _, l := range strings.Split(m[2], "\n") {
				if l = strings.TrimSpace(l); l != "" {
					steps = append(steps, pageStep{line: l})
				}
			}
		default:
			t.Fatalf("%s has a ```%s block: teach TestQuickstartPage to run it", quickstartPage, m[1])
		}
	}
	for _, s := range steps {
		if s.file != "" && !hasCommand(steps, regexp.MustCompile(`^kubectl apply -f `+regexp.QuoteMeta(s.file)+`$`)) {
			t.Errorf("%s shows %s but no command of the page applies it (`kubectl apply -f %s`)", quickstartPage, s.file, s.file)
		}
	}
	return steps
}

func hasCommand(steps []pageStep, cmd *regexp.Regexp) bool {
	for _, s := range steps {
		if cmd.MatchString(s.line) {
			return true
		}
	}
	return false
}

// userShell returns a runner of one of the page's command lines as a user at a terminal in dir: the
// line is run by sh, with the kubectl-etcd plugin built from this tree on PATH and a kubeconfig whose
// context's namespace is ns. It fails the test on a non-zero exit or an output the page does not
// promise (quickstartOutputs). A line ending in " &" keeps running until the test ends.
func userShell(t *testing.T, dir, ns string) func(line string) string {
	t.Helper()
	bin := filepath.Dir(buildKubectlEtcd(t, filepath.Join(dir, "bin")))
	for _, tool := range []string{"kubectl", "etcdctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH (source .cluster/env.sh): %v", tool, err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = ns
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	environ := append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	return func(line string) string {
		t.Helper()
		var want *regexp.Regexp
		for _, o := range quickstartOutputs {
			if o.cmd.MatchString(line) {
				want = o.out
			}
		}
		if bg, ok := strings.CutSuffix(line, " &"); ok {
			return startInBackground(t, dir, environ, bg, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, environ
		raw, err := cmd.CombinedOutput()
		out := string(raw)
		if err != nil {
			t.Fatalf("$ %s: %v\n%s", line, err, out)
		}
		if want != nil && !want.MatchString(out) {
			t.Fatalf("$ %s: the output does not match %s:\n%s", line, want, out)
		}
		return out
	}
}

// startInBackground starts line as sh's background job would and waits until its output (kept in a
// file in dir, as a terminal shows it) matches want; the process is killed when the test ends.
func startInBackground(t *testing.T, dir string, environ []string, line string, want *regexp.Regexp) string {
	t.Helper()
	log, err := os.CreateTemp(dir, "background-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command("sh", "-c", "exec "+line)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, environ, log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("$ %s &: %v", line, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var out []byte
	framework.WaitFor(t, line, 30*time.Second, func() error {
		if out, err = os.ReadFile(log.Name()); err != nil {
			return err
		}
		if want != nil && !want.Match(out) {
			return fmt.Errorf("output %q does not match %s", out, want)
		}
		return nil
	})
	return string(out)
}

// tableObject is one object the page's table says the operator makes.
type tableObject struct {
	kind string
	obj  func() client.Object
	name string
}

// tableKinds maps the words of the table's first column to the kinds they name.
var tableKinds = []struct {
	word *regexp.Regexp
	kind string
	obj  func() client.Object
}{
	{regexp.MustCompile(`\bPod\b`), "Pod", func() client.Object { return &corev1.Pod{} }},
	{regexp.MustCompile(`\bPersistentVolumeClaim\b`), "PersistentVolumeClaim", func() client.Object { return &corev1.PersistentVolumeClaim{} }},
	{regexp.MustCompile(`\bService\b`), "Service", func() client.Object { return &corev1.Service{} }},
	{regexp.MustCompile(`\bPodDisruptionBudget\b`), "PodDisruptionBudget", func() client.Object { return &policyv1.PodDisruptionBudget{} }},
	{regexp.MustCompile(`\bNetworkPolicy\b`), "NetworkPolicy", func() client.Object { return &networkingv1.NetworkPolicy{} }},
	{regexp.MustCompile(`\bcertificates\b`), "Secret", func() client.Object { return &corev1.Secret{} }},
}

var (
	tableRow  = regexp.MustCompile(`(?m)^\| *([^|]*?) *\| *([^|]*?) *\|$`)
	tableName = regexp.MustCompile("`([a-z0-9-]+)`")
)

// operatorObjects reads the table after "What the operator made": each row's kinds (first column)
// times its names (the code spans of the second).
func operatorObjects(t *testing.T, page string) []tableObject {
	t.Helper()
	_, after, ok := strings.Cut(page, "What the operator made")
	if !ok {
		t.Fatalf("%s has no table of what the operator made", quickstartPage)
	}
	_, rest, _ := strings.Cut(after, "\n\n") // the table follows the paragraph that names it
	table, _, _ := strings.Cut(rest, "\n\n")
	var out []tableObject
	for _, row := range tableRow.FindAllStringSubmatch(table, -1) {
		if row[1] == "object" || strings.Trim(row[1], "-") == "" {
			continue // the header and its rule
		}
		var kinds int
		for _, k := range tableKinds {
			if !k.word.MatchString(row[1]) {
				continue
			}
			kinds++
			for _, n := range tableName.FindAllStringSubmatch(row[2], -1) {
				out = append(out, tableObject{kind: k.kind, obj: k.obj, name: n[1]})
			}
		}
		if kinds == 0 {
			t.Fatalf("%s: the table's row %q names no kind TestQuickstartPage knows (tableKinds)", quickstartPage, row[0])
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no objects in the table after \"What the operator made\"", quickstartPage)
	}
	return out
}

// tableMade says which objects of the table are not (yet) in ns, owned by the EtcdCluster (the page:
// "all owned by the EtcdCluster (deleting it deletes them)").
func tableMade(ns string, table []tableObject) error {
	var missing []string
	for _, o := range table {
		obj := o.obj()
		if err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: o.name}, obj); err != nil {
			missing = append(missing, fmt.Sprintf("%s %s: %v", o.kind, o.name, err))
			continue
		}
		owned := false
		for _, r := range obj.GetOwnerReferences() {
			owned = owned || r.Kind == "EtcdCluster" && r.Name == "example"
		}
		if !owned {
			missing = append(missing, fmt.Sprintf("%s %s not owned by the EtcdCluster: %v", o.kind, o.name, obj.GetOwnerReferences()))
		}
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, "; "))
	}
	return nil
}

// tableGone says which objects of the table are still in ns.
func tableGone(ns string, table []tableObject) error {
	var left []string
	for _, o := range table {
		err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: o.name}, o.obj())
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			left = append(left, o.kind+" "+o.name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still there: %s", strings.Join(left, ", "))
	}
	return nil
}
