package chaos

import (
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
