package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSummariseAvailabilityPhasesAndElections(t *testing.T) {
	s := time.Second
	get := func(call, ret time.Duration, term uint64) Op {
		return Op{Input: Input{Kind: Get, Key: "k"}, Output: Output{Term: term}, Call: call, Return: ret}
	}
	history := []Op{
		get(0, 100*time.Millisecond, 2),                      // second 0
		get(1500*time.Millisecond, 1600*time.Millisecond, 2), // second 1
		{Input: Input{Kind: Put, Key: "k", Value: "a"}, Output: Output{Unknown: true}, Call: 2 * s, Return: never},
		get(3*s, 3*s+10*time.Millisecond, 5), // second 3; second 2 had no read
	}
	phases := []Phase{
		{Name: "steady", End: s},
		{Name: "kill-leader", Start: s, End: 2500 * time.Millisecond, Converge: 3 * s},
		{Name: "kill-leader", Start: 2500 * time.Millisecond, End: 4 * s, Converge: 5 * s},
	}
	r := Summarise(7, history, phases, 4*s)
	if r.Availability != 0.75 || r.Elections != 3 || r.Indeterminate != 1 || r.Ops != 4 {
		t.Fatalf("report %+v", r)
	}
	if len(r.Phases) != 2 || r.Phases[1].Count != 2 || r.Phases[1].Ops != 3 || r.Phases[1].Indeterminate != 1 || r.Phases[1].ConvergeSecond != 5 {
		t.Fatalf("phases %+v", r.Phases)
	}
	r.Linearizable = "Ok"
	names := map[string]Result{}
	for _, res := range r.Results("make chaos", time.Unix(0, 0)) {
		names[res.Metric] = res
	}
	if res := names["chaos_kill_leader_converge"]; res.Value != 5 || res.Ratio != 5 {
		t.Fatalf("converge result %+v", res)
	}
	if res := names["chaos_linearizability_violations"]; res.Value != 0 {
		t.Fatalf("violations %+v", res)
	}
	if md := r.Markdown("make chaos", time.Unix(0, 0)); !strings.Contains(md, "| kill-leader | 2 | 3 | 1 |") {
		t.Fatalf("markdown:\n%s", md)
	}
}

// A history with nothing answered passes porcupine; the run must say it checked nothing: too few
// answered operations overall, or none during one fault.
func TestProgressRefusesRunsThatCheckedNothing(t *testing.T) {
	r := Report{Ops: 1200, Indeterminate: 100, Phases: []PhaseStats{{Name: "steady", Ops: 300}, {Name: "kill-leader", Count: 1, Ops: 900, Indeterminate: 100}}}
	if err := r.Progress(1000, 60); err != nil {
		t.Fatalf("a run with 1040 answered operations: %v", err)
	}
	if err := r.Progress(1100, 60); err == nil || !strings.Contains(err.Error(), "1040 operations answered") {
		t.Fatalf("too few operations: %v", err)
	}
	r.Phases = append(r.Phases, PhaseStats{Name: "partition", Count: 2, Ops: 40, Indeterminate: 40})
	if err := r.Progress(1000, 0); err == nil || !strings.Contains(err.Error(), "partition") {
		t.Fatalf("a fault with no answered operation: %v", err)
	}
	if err := (Report{}).Progress(MinAcknowledged, 0); err == nil {
		t.Fatal("an empty history passed")
	}
}

// The default schedule runs every fault kind a random draw could pick, whatever the duration; a run
// says which faults it got through.
func TestDefaultScheduleCoversEveryFault(t *testing.T) {
	r := Report{Faults: DefaultSchedule}
	if missing := r.Missing(RandomFaults); len(missing) > 0 {
		t.Fatalf("the default schedule leaves out %v", missing)
	}
	old := Report{Faults: []string{"scale-1-3", "kill-follower", "kill-leader", "kill-operator", "partition", "pvc-lost", "kubelet-stop"}}
	if missing := old.Missing(RandomFaults); !slices.Equal(missing, []string{"scale-3-5-3-crash", "upgrade-downgrade", "node-poweroff"}) {
		t.Fatalf("missing %v", missing)
	}
}

// A failed run is recorded as it was, and its seed exactly.
func TestResultsRecordFailuresAndTheExactSeed(t *testing.T) {
	const seed = 1795444350918286645
	r := Report{Seed: seed, Lost: 2, Linearizable: "Illegal", Faults: []string{"kill-leader"}, Failure: "after fault partition: not converged"}
	names := map[string]Result{}
	for _, res := range r.Results("make chaos", time.Unix(0, 0)) {
		names[res.Metric] = res
	}
	if got := names["chaos_seed"].Seed; got != strconv.FormatUint(seed, 10) {
		t.Fatalf("seed recorded as %q, want %d", got, uint64(seed))
	}
	if names["chaos_linearizability_violations"].Value != 1 || names["chaos_lost_acknowledged_writes"].Value != 2 {
		t.Fatalf("violations %+v, lost %+v", names["chaos_linearizability_violations"], names["chaos_lost_acknowledged_writes"])
	}
	if n := names["chaos_operations"].Notes; !strings.Contains(n, "kill-leader") || !strings.Contains(n, "not converged") {
		t.Fatalf("notes %q do not say which faults ran and how the run ended", n)
	}
	dir := t.TempDir()
	if err := WriteResults(dir, r.Results("make chaos", time.Unix(0, 0))); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "chaos_seed.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(raw, &back); err != nil || back.Seed != "1795444350918286645" {
		t.Fatalf("chaos_seed.json: %v %s", err, raw)
	}
}
