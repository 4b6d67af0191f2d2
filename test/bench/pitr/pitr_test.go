//go:build bench

// Package pitr measures point-in-time recovery: the continuous archive's RPO after the loss of a
// whole cluster and its volumes, the correctness of restores to past instants, what the archive
// worker costs a steady writer (write p99 and the worker's memory), and the time of a restore that
// replays the archive against a plain snapshot restore of the same data. 3-member etcd clusters run
// on loopback as processes of bin/etcd with the operator's member arguments (test/bench/localetcd),
// the archive as `worker archive run` of this tree against a real MinIO (miniotest), and restores as
// `worker restore`, the restore init container's command. No Kubernetes cluster is needed: it runs
// in `make bench` and alone in `make bench-pitr`.
package pitr

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
	"github.com/etcd-autopilot/etcd-autopilot/test/bench/localetcd"
	"github.com/etcd-autopilot/etcd-autopilot/test/benchdoc"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// The goals are the point-in-time recovery issue's.
const (
	goalRPO      = 2.0  // seconds
	goalCost     = 1.1  // write p99 with the archive ÷ without
	goalRSS      = 64.0 // MiB
	goalRestore  = 1.5  // restore with replay ÷ plain restore
	goalMismatch = 0.0
)

// settings are what a run measures; the result's command names those that were set.
var settings = []string{"BENCH_RATE", "BENCH_PAIRS", "BENCH_SEGMENT", "BENCH_LEAD", "BENCH_INSTANTS", "BENCH_PIT_WRITE", "BENCH_RPO_REPS", "BENCH_RPO_WRITE"}

func command(t *testing.T) string {
	run := "'^" + t.Name() + "$'"
	return framework.BenchCommand(settings, fmt.Sprintf("make bench-pitr BENCH_RUN=%s (go test -tags bench ./test/bench/pitr/ -run %s -count=1 -v)", run, run))
}

func write(t *testing.T, results ...framework.BenchResult) {
	t.Helper()
	dir := filepath.Join(repoRoot, "bench", "results")
	for _, r := range results {
		r.Min, r.Max = localetcd.Bounds(r.Samples)
		r.BaselineMin, r.BaselineMax = localetcd.Bounds(r.BaselineSamples)
		if err := framework.WriteBenchResult(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := benchdoc.Write(filepath.Join(repoRoot, "BENCHMARKS.md"), dir, ""); err != nil {
		t.Fatal(err)
	}
}

func goal(g float64) *float64 { return &g }

// TestBenchArchiveRPO loses a whole cluster under a steady writer: a 3-member cluster, a full
// snapshot in MinIO, the archive worker writing the chain beside it, a writer at BENCH_RATE puts/s
// whose values carry their send time. After BENCH_RPO_WRITE every etcd process and the worker are
// killed at once (SIGKILL) and the data directories deleted; `worker restore` of the snapshot to
// the chain's end, served, then tells the newest write that survived. RPO = the last acknowledged
// write's send time − the newest send time in the restored data. BENCH_RPO_REPS runs, the median.
func TestBenchArchiveRPO(t *testing.T) {
	rate := localetcd.EnvInt(t, "BENCH_RATE", 200)
	reps := localetcd.EnvInt(t, "BENCH_RPO_REPS", 3)
	dur := localetcd.EnvDuration(t, "BENCH_RPO_WRITE", 30*time.Second)
	e := newEnv(t)
	load0, began := localetcd.LoadAvg(), time.Now()
	var rpos []float64
	var details []string
	for i := range reps {
		c := localetcd.NewCluster(t, e.etcd, fmt.Sprintf("rpo%d", i), true)
		c.Start(t, 0)
		prefix, key := fmt.Sprintf("rpo%d/chain/", i), fmt.Sprintf("rpo%d/full.db", i)
		a, snap := e.archiveThenSnapshot(t, c, prefix, key)
		w := &writer{cl: c.Client, rate: rate}
		stop, done := make(chan struct{}), make(chan struct{})
		from := time.Now()
		go func() { defer close(done); w.run(from, from.Add(time.Hour), stop) }()
		time.Sleep(time.Until(from.Add(dur)))

		// The cluster and its volumes gone: every process at once, then the data.
		killed := time.Now()
		_ = a.cmd.Process.Kill()
		c.Kill()
		a.stop(syscall.SIGKILL)
		close(stop)
		<-done
		for _, m := range c.Members {
			if err := os.RemoveAll(m.DataDir()); err != nil {
				t.Fatal(err)
			}
		}
		var lastAck time.Time
		acked := 0
		for _, o := range w.written() {
			if o.err == nil {
				acked++
				if o.sent.After(lastAck) {
					lastAck = o.sent
				}
			}
		}

		r := e.restore(t, snap, key, "--archive-prefix="+prefix)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := r.cl.Get(ctx, keyPrefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var newest time.Time
		for _, kv := range resp.Kvs {
			if at, ok := writeTime(kv.Value); ok && at.After(newest) {
				newest = at
			}
		}
		if lastAck.IsZero() || newest.IsZero() {
			t.Fatalf("run %d: last acknowledged write %v, newest restored %v", i, lastAck, newest)
		}
		rpo := max(0, lastAck.Sub(newest).Seconds())
		rpos = append(rpos, rpo)
		p := r.report.PointInTime
		if p == nil {
			t.Fatalf("run %d: no point-in-time report: %s", i, r.stdout)
		}
		d := fmt.Sprintf("run %d: %d puts acknowledged, the last sent %s before the kill; restored revision %d (%d replayed onto the snapshot at %d), RPO %.3f s; restore %s",
			i, acked, killed.Sub(lastAck).Round(time.Millisecond), p.Revision, p.Applied, p.SnapshotRevision, rpo, r.phases())
		t.Log(d)
		details = append(details, d)
	}
	v := framework.Median(rpos)
	write(t, framework.BenchResult{
		Metric: "pitr_rpo_seconds", Value: framework.Round2(v), Unit: "s", Ratio: framework.Round2(v), Goal: goal(goalRPO),
		Date: time.Now().UTC().Format(time.RFC3339), Command: command(t), Samples: localetcd.RoundAll(rpos),
		Notes: fmt.Sprintf("data lost when a whole cluster and its volumes go: 3 etcd %s processes on loopback (the operator's member arguments), a full snapshot in MinIO, "+
			"`worker archive run` writing the chain beside it with its default flush settings (1 s, 4 MiB), an open-loop writer at %d puts/s (%d-byte values over %d keys, each value starting with its send time). "+
			"After %s every etcd process and the worker are killed at once (SIGKILL) and the data directories deleted; `worker restore` replays the chain onto the snapshot to its end "+
			"and the restored member is served: the figure is the last acknowledged put's send time − the newest send time in the restored keyspace, median of %d runs (the samples). %s. "+
			"Load average %s at the start, %s at the end (2 shared cores); %s in all",
			versions.Default, rate, valueSize, keys, dur, reps, joinDetails(details), load0, localetcd.LoadAvg(), time.Since(began).Round(time.Second)),
	})
}

// TestBenchArchiveCostAndRestore runs one 3-member cluster under a steady open-loop writer for
// BENCH_PAIRS pairs of BENCH_SEGMENT segments (off/on, then on/off): in the on segments the archive
// worker runs, in the off ones it does not. A worker started for an on segment first catches up on
// the revisions of the off segment before it; it starts BENCH_LEAD before the segment, and the
// writes of that lead count on neither side. It measures:
//   - pitr_archive_write_p99_latency: write p99 with the worker ÷ without;
//   - pitr_archive_worker_rss_mib: the worker's peak RSS (VmHWM), catch-ups included;
//   - pitr_restore_time_vs_snapshot: `worker restore` of the full snapshot taken before the
//     segments plus the whole chain (every revision of the segments, archived by the workers) to its
//     end, until the restored member serves a linearizable read ÷ the same for a full snapshot of the
//     same final state taken at the end;
//   - pitr_point_in_time_mismatches: then, under the same writer with deletes mixed in,
//     BENCH_INSTANTS instants in quiet half-seconds of the writer, each with the keyspace's hash read
//     at it; restores to each instant (a time target) and to every fourth instant's revision, from
//     a full snapshot taken just before, compared with the hashes.
func TestBenchArchiveCostAndRestore(t *testing.T) {
	rate := localetcd.EnvInt(t, "BENCH_RATE", 200)
	pairs := localetcd.EnvInt(t, "BENCH_PAIRS", 5)
	segment := localetcd.EnvDuration(t, "BENCH_SEGMENT", time.Minute)
	lead := localetcd.EnvDuration(t, "BENCH_LEAD", 15*time.Second)
	instants := localetcd.EnvInt(t, "BENCH_INSTANTS", 20)
	pitWrite := localetcd.EnvDuration(t, "BENCH_PIT_WRITE", 100*time.Second)
	restores := localetcd.EnvInt(t, "BENCH_RESTORES", 3)
	e := newEnv(t)
	load0, began := localetcd.LoadAvg(), time.Now()
	date := time.Now().UTC().Format(time.RFC3339)
	cmd := command(t)

	c := localetcd.NewCluster(t, e.etcd, "cost", true)
	c.Start(t, 0)
	const prefix = "cost/chain/"
	a, start := e.archiveThenSnapshot(t, c, prefix, "cost/start.db")
	var rss []float64
	stopArchiver := func() {
		if a == nil {
			return
		}
		if m, err := a.peakRSSMiB(); err == nil {
			rss = append(rss, m)
		} else {
			t.Errorf("peak RSS of the archive worker: %v", err)
		}
		a.stop(syscall.SIGTERM)
		a = nil
	}
	stopArchiver()

	// The schedule: windows in order, the worker started at the start of a lead and stopped at the
	// end of the on segments.
	type window struct {
		on, lead bool
		from, to time.Time
	}
	t0 := time.Now().Add(2 * time.Second)
	var windows []window
	at, prevOn := t0, false
	for p := range pairs {
		sides := []bool{false, true}
		if p%2 == 1 {
			sides = []bool{true, false}
		}
		for _, on := range sides {
			if on && !prevOn {
				windows = append(windows, window{lead: true, from: at, to: at.Add(lead)})
				at = at.Add(lead)
			}
			windows = append(windows, window{on: on, from: at, to: at.Add(segment)})
			at, prevOn = at.Add(segment), on
		}
	}
	end := at
	t.Logf("schedule: %d segments of %s, %s leads, from %s to %s", 2*pairs, segment, lead, t0.UTC().Format(time.TimeOnly), end.UTC().Format(time.TimeOnly))
	w := &writer{cl: c.Client, rate: rate}
	done := make(chan struct{})
	go func() { defer close(done); w.run(t0, end, nil) }()
	for _, win := range windows {
		time.Sleep(time.Until(win.from))
		switch {
		case (win.lead || win.on) && a == nil:
			a = e.startArchiver(t, c, prefix)
		case !win.on && !win.lead:
			stopArchiver()
		}
	}
	<-done
	if a == nil {
		a = e.startArchiver(t, c, prefix)
	}
	final := head(t, c.Client)
	a.waitDurable(t, final)
	stopArchiver()
	load1 := localetcd.LoadAvg()

	lat := map[bool][]time.Duration{}
	segP99 := map[bool][]float64{}
	failed := map[bool]int{}
	ops := w.written()
	for k, win := range windows {
		if win.lead {
			continue
		}
		var ls []time.Duration
		fails := 0
		for _, o := range ops {
			if !o.at.Before(win.from) && o.at.Before(win.to) {
				ls = append(ls, o.took)
				if o.err != nil {
					fails++
				}
			}
		}
		lat[win.on] = append(lat[win.on], ls...)
		failed[win.on] += fails
		segP99[win.on] = append(segP99[win.on], localetcd.Ms(localetcd.Quantile(ls, 0.99)))
		t.Logf("window %d (archive %v): %d puts, p50 %.2f ms, p99 %.2f ms, %d failed", k, win.on, len(ls),
			localetcd.Ms(localetcd.Quantile(ls, 0.5)), localetcd.Ms(localetcd.Quantile(ls, 0.99)), fails)
	}
	onP99, offP99 := localetcd.Ms(localetcd.Quantile(lat[true], 0.99)), localetcd.Ms(localetcd.Quantile(lat[false], 0.99))
	t.Logf("write p99: archive on %.2f ms (%d puts, %d failed), off %.2f ms (%d puts, %d failed): %.3f×; worker peak RSS %v MiB",
		onP99, len(lat[true]), failed[true], offP99, len(lat[false]), failed[false], onP99/offP99, localetcd.RoundAll(rss))

	// Restore time: the start snapshot and the whole chain, against a snapshot of the end.
	last := e.snapshot(t, c, "cost/final.db")
	if last.Revision != final {
		t.Fatalf("final snapshot at revision %d, the archive ends at %d", last.Revision, final)
	}
	objects, objectBytes := e.chainObjects(t, prefix)
	loadR := localetcd.LoadAvg()
	// Alternated, so that a burst of the machine's other load does not fall on one side only; the
	// figure is each side's median.
	var replayedRuns, plainRuns []restored
	var replayedHash, plainHash string
	for i := range restores {
		t.Run(fmt.Sprintf("restore with replay %d", i), func(t *testing.T) {
			r := e.restore(t, start, "cost/start.db", "--archive-prefix="+prefix)
			replayedHash = mustHash(t, r)
			replayedRuns = append(replayedRuns, r)
		})
		t.Run(fmt.Sprintf("plain restore %d", i), func(t *testing.T) {
			r := e.restore(t, last, "cost/final.db")
			plainHash = mustHash(t, r)
			plainRuns = append(plainRuns, r)
		})
	}
	if len(replayedRuns) == 0 || len(plainRuns) == 0 {
		t.Fatal("no restore succeeded")
	}
	replayed, plain := median(replayedRuns), median(plainRuns)
	if replayedHash != plainHash {
		t.Errorf("the replayed restore's keyspace differs from the final snapshot's")
	}
	restoreNote := fmt.Sprintf("with replay: %s from %d segment objects (%.1f MiB; the worker merges segments older than its default merge age), %.1f s (%s); plain: %.1f s (%s); load average %s before the restores",
		replayedSummary(replayed), objects, float64(objectBytes)/(1<<20), replayed.took.Seconds(), replayed.phases(), plain.took.Seconds(), plain.phases(), loadR)
	t.Log(restoreNote)

	// Point-in-time correctness.
	a = e.startArchiver(t, c, prefix)
	pit := e.snapshot(t, c, "pit/full.db")
	seed := time.Now().UnixNano()
	refs, unusable := captureInstants(t, c, rate, instants, pitWrite, rand.New(rand.NewPCG(uint64(seed), 1)))
	a.waitDurable(t, head(t, c.Client))
	stopArchiver()
	mismatches, checked := 0, 0
	var mismatchNotes []string
	for i, ref := range refs {
		targets := []string{"--target-time=" + ref.at.UTC().Format(time.RFC3339Nano)}
		if i%4 == 0 {
			targets = append(targets, fmt.Sprintf("--target-revision=%d", ref.rev))
		}
		for _, target := range targets {
			checked++
			var got string
			var rev int64
			ok := t.Run(fmt.Sprintf("instant %d %s", i, target), func(t *testing.T) {
				r := e.restore(t, pit, "pit/full.db", "--archive-prefix="+prefix, target)
				got = mustHash(t, r)
				if r.report.PointInTime != nil {
					rev = r.report.PointInTime.Revision
				}
			})
			if !ok || got != ref.hash || rev != ref.rev {
				mismatches++
				n := fmt.Sprintf("instant %d (%s, revision %d, %d keys) restored with %s: revision %d, hash match %v", i, ref.at.UTC().Format(time.RFC3339Nano), ref.rev, ref.keys, target, rev, got == ref.hash)
				t.Error(n)
				mismatchNotes = append(mismatchNotes, n)
			}
		}
	}
	t.Logf("%d restores to %d instants (%d unusable), %d mismatches", checked, len(refs), unusable, mismatches)

	p99 := framework.BenchResult{
		Metric: "pitr_archive_write_p99_latency", Value: framework.Round2(onP99), Unit: "ms", Baseline: framework.Round2(offP99), Ratio: framework.Round2(onP99 / offP99),
		Goal: goal(goalCost), Date: date, Command: cmd, Samples: localetcd.RoundAll(segP99[true]), BaselineSamples: localetcd.RoundAll(segP99[false]),
		Notes: fmt.Sprintf("p99 of an open-loop writer's puts (%d/s, %d-byte values over %d keys, latency from each put's scheduled time, all three members as endpoints) "+
			"against 3 etcd %s processes on loopback with the operator's member arguments, with the archive worker (`worker archive run` to MinIO on loopback, default flush settings) running; "+
			"baseline: the same cluster without it. %d segments of %s alternate (off/on, then on/off); a worker started for an on segment starts %s before it and first catches up "+
			"on the off segment's revisions (writes in that lead count on neither side), so the on side includes no catch-up burst but the worker's steady work only. "+
			"Value and baseline are the p99 of all puts of a side (%d and %d, %d and %d failed); the samples are each segment's p99. Load average %s at the start, %s at the end (2 shared cores)",
			rate, valueSize, keys, versions.Default, 2*pairs, segment, lead, len(lat[true]), len(lat[false]), failed[true], failed[false], load0, load1),
	}
	peak := slices.Max(rss)
	mem := framework.BenchResult{
		Metric: "pitr_archive_worker_rss_mib", Value: framework.Round2(peak), Unit: "MiB", Ratio: framework.Round2(peak), Goal: goal(goalRSS),
		Date: date, Command: cmd, Samples: localetcd.RoundAll(rss),
		Notes: fmt.Sprintf("peak resident memory (VmHWM) of `worker archive run` archiving a 3-member cluster under %d puts/s (the writer of pitr_archive_write_p99_latency), "+
			"one sample per worker process: the first archived only the chain's start, each next one caught up on the %s of revisions before its lead and ran through its on segments, the last one through the point-in-time phase; the value is the largest",
			rate, segment),
	}
	ratio := replayed.took.Seconds() / plain.took.Seconds()
	restore := framework.BenchResult{
		Metric: "pitr_restore_time_vs_snapshot", Value: framework.Round2(replayed.took.Seconds()), Unit: "s", Baseline: framework.Round2(plain.took.Seconds()),
		Ratio: framework.Round2(ratio), Goal: goal(goalRestore), Date: date, Command: cmd,
		Samples: tooks(replayedRuns), BaselineSamples: tooks(plainRuns),
		Notes: fmt.Sprintf("`worker restore` (the restore init container's command) of one member from MinIO on loopback, until the restored member served a linearizable read: "+
			"the full snapshot taken before the %s of pitr_archive_write_p99_latency's writer (%d puts/s) plus the whole chain replayed to its end, "+
			"against the plain restore of a full snapshot taken at the end (the same keyspace, checked by hash): %s. Medians of %d and %d runs, alternated", end.Sub(t0).Round(time.Second), rate, restoreNote, len(replayedRuns), len(plainRuns)),
	}
	correct := framework.BenchResult{
		Metric: "pitr_point_in_time_mismatches", Value: float64(mismatches), Unit: "count", Ratio: float64(mismatches), Goal: goal(goalMismatch),
		Date: date, Command: cmd, Seed: fmt.Sprint(seed),
		Notes: fmt.Sprintf("restores that did not give the keyspace of their instant: the cluster of pitr_archive_write_p99_latency under %d operations/s for %s (puts and, one in ten, deletes of other keys, over %d keys), "+
			"archived; %d instants, each in the middle of a half-second in which the writer sends nothing, the keyspace's hash (every field of every key) and revision read at it (linearizable); "+
			"%d of them unusable (a write in flight across the instant, or the read outlasting the quiet half-second) and left out. Each restored by `worker restore` from a full snapshot taken just before the writer "+
			"with --target-time (the instant) and every fourth also with --target-revision: %d restores, each compared with the instant's hash and revision. Mismatches: %s",
			rate, pitWrite, keys, instants, unusable, checked, joinDetails(mismatchNotes)),
	}
	write(t, p99, mem, restore, correct)
	t.Logf("%s in all", time.Since(began).Round(time.Second))
}

// ref is the keyspace at an instant: its hash, the revision it was read at, its number of keys.
type ref struct {
	at   time.Time
	read time.Time // when the read returned
	hash string
	rev  int64
	keys int
}

// captureInstants writes for dur with a writer with deletes, leaving out n half-seconds at random
// places, one per n-th of dur, and reads the keyspace in the middle of each. An instant is unusable
// when a write scheduled before it finished after it, or one was scheduled before the read returned
// (the state at it may then not be the one read); it returns the others and how many were unusable.
func captureInstants(t *testing.T, c *localetcd.Cluster, rate, n int, dur time.Duration, rng *rand.Rand) ([]ref, int) {
	t.Helper()
	const quiet = 250 * time.Millisecond // on each side of an instant
	from := time.Now().Add(time.Second)
	slot := (dur - 2*time.Second) / time.Duration(n)
	holes := make([]time.Time, n)
	for i := range holes {
		holes[i] = from.Add(time.Second + time.Duration(i)*slot + quiet + time.Duration(rng.Int64N(int64(slot-2*quiet))))
	}
	w := &writer{cl: c.Client, rate: rate, deletes: true, skip: func(at time.Time) bool {
		for _, h := range holes {
			if !at.Before(h.Add(-quiet)) && at.Before(h.Add(quiet)) {
				return true
			}
		}
		return false
	}}
	done := make(chan struct{})
	go func() { defer close(done); w.run(from, from.Add(dur), nil) }()
	refs := make([]ref, n)
	for i, h := range holes {
		time.Sleep(time.Until(h))
		refs[i].at = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var err error
		refs[i].hash, refs[i].rev, refs[i].keys, err = keyspace(ctx, c.Client, 0)
		refs[i].read = time.Now()
		cancel()
		if err != nil {
			t.Fatalf("keyspace at instant %d: %v", i, err)
		}
	}
	<-done
	var usable []ref
	for _, r := range refs {
		ok := true
		for _, o := range w.written() {
			if o.at.Before(r.at) && o.at.Add(o.took).After(r.at) || !o.at.Before(r.at) && o.at.Before(r.read) {
				ok = false
				break
			}
		}
		if ok {
			usable = append(usable, r)
		}
	}
	return usable, n - len(usable)
}

func mustHash(t *testing.T, r restored) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, _, _, err := keyspace(ctx, r.cl, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// median is the run of median duration.
func median(runs []restored) restored {
	sorted := slices.SortedFunc(slices.Values(runs), func(a, b restored) int { return cmp.Compare(a.took, b.took) })
	return sorted[len(sorted)/2]
}

func tooks(runs []restored) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = framework.Round2(r.took.Seconds())
	}
	return out
}

func replayedSummary(r restored) string {
	if p := r.report.PointInTime; p != nil {
		return fmt.Sprintf("%d revisions replayed onto the snapshot at %d", p.Applied, p.SnapshotRevision)
	}
	return "no point-in-time report"
}

func joinDetails(ds []string) string {
	if len(ds) == 0 {
		return "none"
	}
	return strings.Join(ds, "; ")
}
