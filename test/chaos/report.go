package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// Phase is a named interval of the run (steady, or one fault from injection until the cluster
// converged again), on the workload's clock.
type Phase struct {
	Name       string
	Start, End time.Duration
	// Converge is how long the cluster took to be converged again after the fault was healed.
	Converge time.Duration
}

// PhaseStats are the latencies of the operations called during the phases of one name (one kind of
// fault) that got an answer, and the slowest convergence after them.
type PhaseStats struct {
	Name           string  `json:"name"`
	Count          int     `json:"count"`
	Ops            int     `json:"ops"`
	Indeterminate  int     `json:"indeterminate"`
	P50Millis      float64 `json:"p50_ms"`
	P99Millis      float64 `json:"p99_ms"`
	ConvergeSecond float64 `json:"converge_s"`
}

// Report is what a run measured.
type Report struct {
	Seed          uint64       `json:"seed"`
	Duration      float64      `json:"duration_s"`
	Ops           int          `json:"ops"`
	Indeterminate int          `json:"indeterminate"`
	Settled       int          `json:"settled"`
	Availability  float64      `json:"availability"`
	Elections     uint64       `json:"elections"`
	Phases        []PhaseStats `json:"phases"`
	Lost          int          `json:"lost_acknowledged_writes"`
	Phantom       int          `json:"phantom_writes"`
	Linearizable  string       `json:"linearizable"`
	// Faults are the faults that ran, in order; Failure the fault or convergence that failed, if any.
	Faults  []string `json:"faults"`
	Failure string   `json:"failure,omitempty"`
}

// RandomFaults are the faults the default schedule runs once each, and a random schedule draws
// from (scale-1-3 needs a 1-member cluster, full-disk a memory-backed volume: TestChaosFullDisk runs
// it). node-poweroff, like SoakFaults, needs the local cluster with several nodes.
var RandomFaults = []string{"kill-follower", "kill-leader", "kill-operator", "pvc-lost", "partition", "kubelet-stop", "scale-3-5-3-crash", "upgrade-downgrade", "node-poweroff"}

// SoakFaults are the other node faults: a random schedule draws them beside RandomFaults, so a soak
// (make chaos) meets them, but the default schedule leaves them out to keep CI's run short.
var SoakFaults = []string{"node-partition", "node-drain", "node-deleted"}

// DefaultSchedule runs every fault kind once before any random one, so that a run of any duration
// (the 3 minutes of CI too) covers them all: a random draw in a short run would leave the slow ones
// (scale, upgrade) out of most runs.
var DefaultSchedule = append([]string{"scale-1-3"}, RandomFaults...)

// MinAcknowledged is the fewest operations with an answer a run must hold: porcupine finds an
// empty (or nearly empty) history linearizable, which says nothing.
const MinAcknowledged = 1000

// Progress says whether the run checked anything: at least minAcked operations answered (final
// reads aside), and some answered in every phase, each fault included.
func (r Report) Progress(minAcked, finalReads int) error {
	if acked := r.Ops - r.Indeterminate - finalReads; acked < minAcked {
		return fmt.Errorf("%d operations answered during the run, want at least %d: the workload barely ran", acked, minAcked)
	}
	for _, p := range r.Phases {
		if p.Ops-p.Indeterminate == 0 {
			return fmt.Errorf("no operation answered during the %d %s phase(s) (%d called): nothing was checked under that fault", p.Count, p.Name, p.Ops)
		}
	}
	return nil
}

// Missing are the faults of want that the run did not get through.
func (r Report) Missing(want []string) []string {
	var out []string
	for _, f := range want {
		if !slices.Contains(r.Faults, f) {
			out = append(out, f)
		}
	}
	return out
}

// Summarise computes availability (the fraction of whole seconds of the run in which some
// linearizable read returned), the raft elections seen (the rise of the term in response headers),
// and latencies per phase. history is the raw one (indeterminate operations included).
func Summarise(seed uint64, history []Op, phases []Phase, runFor time.Duration) Report {
	r := Report{Seed: seed, Duration: runFor.Seconds(), Ops: len(history)}
	seconds := int(runFor / time.Second)
	readIn := make([]bool, seconds)
	var minTerm, maxTerm uint64
	for _, op := range history {
		if op.Output.Unknown {
			r.Indeterminate++
			continue
		}
		if op.Input.Kind == Get {
			if s := int(op.Return / time.Second); s < seconds {
				readIn[s] = true
			}
		}
		if t := op.Output.Term; t != 0 {
			if minTerm == 0 || t < minTerm {
				minTerm = t
			}
			maxTerm = max(maxTerm, t)
		}
	}
	up := 0
	for _, ok := range readIn {
		if ok {
			up++
		}
	}
	if seconds > 0 {
		r.Availability = float64(up) / float64(seconds)
	}
	r.Elections = maxTerm - minTerm
	// Phases of the same fault are summed up: latencies over all of them, the slowest convergence.
	var order []string
	stats, lat := map[string]*PhaseStats{}, map[string][]time.Duration{}
	for _, p := range phases {
		st := stats[p.Name]
		if st == nil {
			st = &PhaseStats{Name: p.Name}
			stats[p.Name] = st
			order = append(order, p.Name)
		}
		st.Count++
		st.ConvergeSecond = max(st.ConvergeSecond, p.Converge.Seconds())
		for _, op := range history {
			if op.Call < p.Start || op.Call >= p.End {
				continue
			}
			st.Ops++
			if op.Output.Unknown {
				st.Indeterminate++
				continue
			}
			lat[p.Name] = append(lat[p.Name], op.Return-op.Call)
		}
	}
	for _, name := range order {
		st := stats[name]
		st.P50Millis, st.P99Millis = percentile(lat[name], 0.50), percentile(lat[name], 0.99)
		r.Phases = append(r.Phases, *st)
	}
	return r
}

func percentile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
}

// Result is one figure in the project's bench/results format.
type Result = framework.BenchResult

// Results are the report's figures as bench results: counts carry ratio = value (they have no
// baseline); latencies under faults are compared with the steady phase's.
func (r Report) Results(command string, now time.Time) []Result {
	date := now.UTC().Format(time.RFC3339)
	count := func(metric string, v float64, unit string) Result {
		return Result{Metric: metric, Value: v, Unit: unit, Ratio: v, Date: date, Command: command}
	}
	out := []Result{
		count("chaos_linearizability_violations", b2f(r.Linearizable != "Ok"), "count"),
		count("chaos_lost_acknowledged_writes", float64(r.Lost), "count"),
		{Metric: "chaos_operations", Value: float64(r.Ops), Unit: "count", Ratio: float64(r.Ops), Date: date, Command: command,
			Notes: r.faultNotes()},
		count("chaos_leader_elections", float64(r.Elections), "count"),
		count("chaos_availability", r.Availability, "fraction of seconds with a linearizable read"),
		{Metric: "chaos_seed", Value: float64(r.Seed), Unit: "seed", Ratio: float64(r.Seed), Date: date, Command: command,
			Seed: strconv.FormatUint(r.Seed, 10), Notes: "the run's seed exactly in seed (value, a float, loses its last digits)"},
	}
	var steady PhaseStats
	for _, p := range r.Phases {
		if p.Name == "steady" {
			steady = p
		}
	}
	for _, p := range r.Phases {
		for _, f := range []struct {
			name     string
			v, basev float64
		}{{"p50", p.P50Millis, steady.P50Millis}, {"p99", p.P99Millis, steady.P99Millis}} {
			res := Result{Metric: fmt.Sprintf("chaos_%s_latency_%s", metricName(p.Name), f.name), Value: f.v, Unit: "ms",
				Baseline: f.basev, Date: date, Command: command}
			if f.basev > 0 {
				res.Ratio = f.v / f.basev
			}
			out = append(out, res)
		}
		if p.Name != "steady" {
			out = append(out, count(fmt.Sprintf("chaos_%s_converge", metricName(p.Name)), p.ConvergeSecond, "s (slowest)"))
		}
	}
	return out
}

// faultNotes says what the run went through, and how it ended.
func (r Report) faultNotes() string {
	s := fmt.Sprintf("operations by the chaos workload; faults run, in order: %s; porcupine: %s", strings.Join(r.Faults, ", "), r.Linearizable)
	if r.Failure != "" {
		s += "; the run failed: " + r.Failure
	}
	return s
}

// metricName spells a fault's name as the project's metric names are spelled.
func metricName(fault string) string { return strings.ReplaceAll(fault, "-", "_") }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// WriteResults writes each result to dir/<metric>.json.
func WriteResults(dir string, results []Result) error {
	for _, res := range results {
		if err := framework.WriteBenchResult(dir, res); err != nil {
			return err
		}
	}
	return nil
}

// Markdown is the report as the chaos section of BENCHMARKS.md.
func (r Report) Markdown(command string, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Chaos (`test/chaos`)\n\n")
	fmt.Fprintf(&b, "`%s`, %s: %d operations in %.0f s by 6 clients over 10 keys (puts, linearizable gets, compare-and-swap "+
		"transactions) while faults hit the cluster one after another, each healed and followed by convergence (the operator "+
		"reports it and the pods, etcd's members and their leader agree).\n\n", command, now.UTC().Format("2006-01-02"), r.Ops, r.Duration)
	fmt.Fprintf(&b, "- faults run, in order: %s\n", strings.Join(r.Faults, ", "))
	if r.Failure != "" {
		fmt.Fprintf(&b, "- **the run failed**: %s\n", r.Failure)
	}
	fmt.Fprintf(&b, "- porcupine (per-key register model): **%s**; acknowledged writes lost: **%d**; writes nobody made: **%d**\n", r.Linearizable, r.Lost, r.Phantom)
	fmt.Fprintf(&b, "- indeterminate writes (failed or timed out): %d, of which etcd's event log showed %d had taken effect\n", r.Indeterminate, r.Settled)
	fmt.Fprintf(&b, "- availability: %.3f of the seconds had a successful linearizable read; leader elections (rise of the raft term): %d\n\n", r.Availability, r.Elections)
	b.WriteString("| phase | times | operations | indeterminate | p50 | p99 | converged after healing (slowest) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Phases {
		conv := "—"
		if p.Name != "steady" {
			conv = fmt.Sprintf("%.1f s", p.ConvergeSecond)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f ms | %.1f ms | %s |\n", p.Name, p.Count, p.Ops, p.Indeterminate, p.P50Millis, p.P99Millis, conv)
	}
	b.WriteString("\nA phase runs from the fault's injection until convergence; `steady` is the first 15 s without faults. " +
		"The figures are also in `bench/results/chaos_*.json`.\n")
	return b.String()
}
