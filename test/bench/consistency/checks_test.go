//go:build bench

// Package consistency measures what the consistency checks cost a steady writer: two 3-member etcd
// clusters run side by side on loopback as separate processes of the etcd binary the project builds
// (bin/etcd), with the arguments the operator gives its members (resources.MemberPod), one with
// etcd's checks on (resources.ConsistencyArgs) and the operator's HashKV round run against it, the
// other with neither. It needs no Kubernetes cluster, so it runs in `make bench` and alone in
// `make bench-consistency`.
package consistency

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
	"github.com/etcd-autopilot/etcd-autopilot/test/bench/localetcd"
	"github.com/etcd-autopilot/etcd-autopilot/test/benchdoc"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const (
	repoRoot = "../../.."
	// goal is issue 35's: write p99 with the periodic checks on ÷ off.
	goal = 1.05
	// valueSize is the size of a preloaded value: a few KiB, as a Kubernetes object is.
	valueSize = 4096
	// writeSize is the size of the steady writer's values.
	writeSize = 256
	// writeKeys is how many keys the steady writer overwrites in turn.
	writeKeys = 10000
	// putTimeout bounds one put of the steady writer; a put that fails counts with the time it took.
	putTimeout = 10 * time.Second
)

// settings are what a run measures; the result's command names those that were set.
var settings = []string{"BENCH_DB_MIB", "BENCH_RATE", "BENCH_SEGMENT", "BENCH_PAIRS"}

// TestBenchConsistencyChecksCost measures the write p99 of a steady open-loop writer against a
// cluster with the consistency checks on, divided by the same against a cluster without them, at
// the checks' own pace: the writer alternates between the two clusters in segments (off/on, then
// on/off, so drift in the machine's load hits both sides alike), and the on segments together last
// one operator interval (resources.ConsistencyCheckInterval) and contain one operator HashKV round
// and one etcd periodic corruption check. etcd's periodic check runs every
// resources.CorruptCheckInterval (three operator intervals), so the on side holds three times its
// real pace: the figure is an upper bound of what the checks cost.
func TestBenchConsistencyChecksCost(t *testing.T) {
	bin := localetcd.Binary(t, repoRoot)
	dbMiB := localetcd.EnvInt(t, "BENCH_DB_MIB", 128)
	rate := localetcd.EnvInt(t, "BENCH_RATE", 200)
	pairs := localetcd.EnvInt(t, "BENCH_PAIRS", 5)
	segment := localetcd.EnvDuration(t, "BENCH_SEGMENT", resources.ConsistencyCheckInterval/time.Duration(pairs))
	load0 := localetcd.LoadAvg()
	began := time.Now()

	off := localetcd.NewCluster(t, bin, "off", false)
	on := localetcd.NewCluster(t, bin, "on", true)
	off.Start(t, 0)
	on.Start(t, resources.CorruptCheckInterval)
	for _, c := range []*localetcd.Cluster{off, on} {
		took := preload(t, c, int64(dbMiB)<<20)
		t.Logf("%s: preloaded %d MiB in %s", c.Name, dbMiB, took.Round(time.Second))
	}

	// The schedule: segment k starts at t0 + k·segment; pair p is (off, on) for even p, (on, off) for
	// odd p. The operator's round runs in the middle of the second on segment, etcd's periodic check
	// in the middle of the last but one.
	sides := make([]*localetcd.Cluster, 0, 2*pairs)
	for p := 0; p < pairs; p++ {
		if p%2 == 0 {
			sides = append(sides, off, on)
		} else {
			sides = append(sides, on, off)
		}
	}
	var onSegments []int
	for k, c := range sides {
		if c == on {
			onSegments = append(onSegments, k)
		}
	}
	roundSeg, checkSeg := onSegments[min(1, len(onSegments)-1)], onSegments[max(0, len(onSegments)-2)]

	// Restart both clusters on their preloaded data, so that etcd's periodic check (a ticker each
	// member starts once it has started, after its initial corruption check) fires where the schedule
	// wants it: once, in the middle of checkSeg, and not again before the end. The schedule starts from
	// when the on side's tickers started (read from their logs): members started together wait on each
	// other in their initial checks, for seconds that vary. Both sides restart, so both have started
	// alike.
	const settle = time.Minute // longer than a restart takes
	checkMid := time.Duration(checkSeg)*segment + segment/2
	interval := settle + checkMid
	if 2*interval < settle+time.Duration(len(sides))*segment+10*time.Second {
		t.Fatalf("etcd's periodic check every %s would fire twice in the schedule; use more pairs", interval)
	}
	off.Stop(t)
	on.Stop(t)
	restarted := time.Now()
	off.Start(t, 0)
	on.Start(t, interval)
	t.Logf("both clusters restarted in %s", time.Since(restarted).Round(time.Millisecond))
	tickers := tickerStarts(t, on, restarted)
	t0 := tickers[len(tickers)/2].Add(settle)
	end := t0.Add(time.Duration(len(sides)) * segment)
	if time.Now().After(t0) {
		t.Fatalf("clusters took longer than %s to restart", settle)
	}
	t.Logf("schedule: %d segments of %s from %s; operator round in segment %d, etcd periodic check (every %s) in segment %d",
		len(sides), segment, t0.UTC().Format(time.TimeOnly), roundSeg, interval.Round(time.Second), checkSeg)

	var rounds []time.Duration
	var roundAt time.Time
	roundDone := make(chan struct{})
	go func() {
		defer close(roundDone)
		time.Sleep(time.Until(t0.Add(time.Duration(roundSeg)*segment + segment/2)))
		roundAt = time.Now()
		d, err := hashRound(on)
		if err != nil {
			t.Errorf("operator round in the schedule: %v", err)
			return
		}
		rounds = append(rounds, d)
		t.Logf("operator round in segment %d took %s", roundSeg, d.Round(time.Millisecond))
	}()
	lat := map[*localetcd.Cluster][]time.Duration{}
	var onPuts []put
	segP99 := map[*localetcd.Cluster][]float64{}
	failed := map[*localetcd.Cluster]int{}
	for k, c := range sides {
		from := t0.Add(time.Duration(k) * segment)
		puts, fails := write(c, from, from.Add(segment), rate)
		ls := make([]time.Duration, len(puts))
		for i, p := range puts {
			ls[i] = p.took
		}
		if c == on {
			onPuts = append(onPuts, puts...)
		}
		lat[c] = append(lat[c], ls...)
		failed[c] += fails
		segP99[c] = append(segP99[c], localetcd.Ms(localetcd.Quantile(ls, 0.99)))
		t.Logf("segment %d (%s): %d puts, p50 %.2f ms, p99 %.2f ms, %d failed", k, c.Name, len(ls), localetcd.Ms(localetcd.Quantile(ls, 0.5)), localetcd.Ms(localetcd.Quantile(ls, 0.99)), fails)
	}
	<-roundDone
	load1 := localetcd.LoadAvg()

	// Evidence that the on side ran what it should: exactly one periodic check, inside an on segment.
	checks := periodicChecks(t, on)
	var inWindow []time.Time
	for _, at := range checks {
		if at.After(t0) && at.Before(end) {
			inWindow = append(inWindow, at)
		}
	}
	if len(inWindow) != 1 || sides[int(inWindow[0].Sub(t0)/segment)] != on {
		t.Fatalf("want one etcd periodic check, in an on segment; got %v (schedule from %s, segments of %s)", checks, t0, segment)
	}
	t.Logf("etcd periodic check finished at %s (segment %d)", inWindow[0].UTC().Format(time.TimeOnly), int(inWindow[0].Sub(t0)/segment))

	// What each check did to the puts scheduled while it ran (etcd logs only the periodic check's end;
	// its hashes take about as long as a round).
	offP99d := localetcd.Quantile(lat[off], 0.99)
	during := func(what string, from, to time.Time) string {
		var n, over int
		var worst time.Duration
		for _, p := range onPuts {
			if p.at.Before(from) || p.at.After(to) {
				continue
			}
			n++
			worst = max(worst, p.took)
			if p.took > offP99d {
				over++
			}
		}
		msg := fmt.Sprintf("%d puts scheduled during %s: slowest %.0f ms, %d above the off side's p99", n, what, localetcd.Ms(worst), over)
		t.Log(msg)
		return msg
	}
	var roundEffect string
	if len(rounds) > 0 {
		roundEffect = during("the operator's round", roundAt, roundAt.Add(rounds[0]))
	}
	checkEffect := during("the 2 s before etcd's periodic check ended", inWindow[0].Add(-2*time.Second), inWindow[0])

	// How long one round takes on this database, out of the schedule (nothing else running).
	for i := 0; i < 3; i++ {
		d, err := hashRound(on)
		if err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, d)
	}
	dbSize := dbSize(t, on)

	onP99, offP99 := localetcd.Ms(localetcd.Quantile(lat[on], 0.99)), localetcd.Ms(localetcd.Quantile(lat[off], 0.99))
	t.Logf("write p99: on %.2f ms (%d puts, %d failed), off %.2f ms (%d puts, %d failed): %.3f×; HashKV rounds %v on %.0f MiB; load %s → %s; %s in all",
		onP99, len(lat[on]), failed[on], offP99, len(lat[off]), failed[off], onP99/offP99, rounds, float64(dbSize)/(1<<20), load0, load1, time.Since(began).Round(time.Second))

	run := "'^" + t.Name() + "$'"
	cmd := framework.BenchCommand(settings, fmt.Sprintf("make bench-consistency BENCH_RUN=%s (go test -tags bench ./test/bench/consistency/ -run %s -count=1 -v)", run, run))
	date := time.Now().UTC().Format(time.RFC3339)
	g := goal
	p99 := framework.BenchResult{
		Metric: "consistency_checks_write_p99_latency", Value: framework.Round2(onP99), Unit: "ms", Baseline: framework.Round2(offP99), Ratio: framework.Round2(onP99 / offP99),
		Date: date, Command: cmd, Goal: &g, Samples: localetcd.RoundAll(segP99[on]), BaselineSamples: localetcd.RoundAll(segP99[off]),
		Notes: fmt.Sprintf("p99 of an open-loop writer's puts (%d/s, %d-byte values over %d keys, latency from each put's scheduled time, all three members as endpoints) "+
			"against 3 etcd %s processes on loopback with the operator's member arguments and a %d MiB database (%d-byte values), with the consistency checks on: "+
			"etcd's initial, compaction-hash and periodic checks (resources.ConsistencyArgs), the periodic one firing once, and one operator round (HashKV of every member at a common revision); "+
			"baseline: the same against a twin cluster without any check. The writer alternates between the two in %d segments of %s (off/on, then on/off), "+
			"so each side gets %s, one operator interval: the operator's round at its real pace, etcd's periodic check at three times its (an upper bound). "+
			"Value and baseline are the p99 of all puts of a side (%d and %d, %d and %d failed); the samples are each segment's p99. %s; %s. Load average %s at the start, %s at the end (2 shared cores)",
			rate, writeSize, writeKeys, versions.Default, dbMiB, valueSize, len(sides), segment, time.Duration(pairs)*segment,
			len(lat[on]), len(lat[off]), failed[on], failed[off], roundEffect, checkEffect, load0, load1),
	}
	p99.Min, p99.Max = localetcd.Bounds(p99.Samples)
	p99.BaselineMin, p99.BaselineMax = localetcd.Bounds(p99.BaselineSamples)
	var roundSecs []float64
	for _, d := range rounds {
		roundSecs = append(roundSecs, d.Seconds())
	}
	r := framework.Median(roundSecs)
	round := framework.BenchResult{
		Metric: "consistency_hashkv_round_seconds", Value: framework.Round2(r), Unit: "s", Ratio: framework.Round2(r), Date: date, Command: cmd, Samples: localetcd.RoundAll(roundSecs),
		Notes: fmt.Sprintf("one operator consistency round on the checked cluster of consistency_checks_write_p99_latency: the status of each of 3 members, then HashKV of all of them at once at the lowest revision they hold, as the operator does; "+
			"database %.0f MiB (%d MiB preloaded plus the writer's revisions); the first sample ran under the writer, the others right after it; a count",
			float64(dbSize)/(1<<20), dbMiB),
	}
	round.Min, round.Max = localetcd.Bounds(round.Samples)
	results := filepath.Join(repoRoot, "bench", "results")
	for _, res := range []framework.BenchResult{p99, round} {
		if err := framework.WriteBenchResult(results, res); err != nil {
			t.Fatal(err)
		}
	}
	if err := benchdoc.Write(filepath.Join(repoRoot, "BENCHMARKS.md"), results, ""); err != nil {
		t.Fatal(err)
	}
}

// --- the clusters -------------------------------------------------------------------------------------------------

// preload writes bytes of distinct keys with valueSize values, 64 puts in flight.
func preload(t *testing.T, c *localetcd.Cluster, bytes int64) time.Duration {
	t.Helper()
	start := time.Now()
	n := int(bytes / valueSize)
	keys := make(chan int)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := make([]byte, valueSize)
			for i := range keys {
				for j := range val {
					val[j] = byte('a' + (i*31+j*7)%26)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := c.Client.Put(ctx, fmt.Sprintf("/preload/%08d", i), string(val))
				cancel()
				if err != nil {
					errs <- fmt.Errorf("preload %s: %w", c.Name, err)
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case keys <- i:
		case err := <-errs:
			close(keys)
			t.Fatal(err)
		}
	}
	close(keys)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return time.Since(start)
}

// put is one put of the steady writer: when it was scheduled, and how long it took from then.
type put struct {
	at   time.Time
	took time.Duration
}

// write puts rate times a second from from to to, each at its scheduled time whatever the puts before
// it are doing (open loop: a stall shows in every put it delays, not only in the one it holds), and
// returns each put with its latency from its scheduled time, and how many failed.
func write(c *localetcd.Cluster, from, to time.Time, rate int) ([]put, int) {
	every := time.Second / time.Duration(rate)
	val := strings.Repeat("w", writeSize)
	var mu sync.Mutex
	var puts []put
	failed := 0
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		at := from.Add(time.Duration(i) * every)
		if !at.Before(to) {
			break
		}
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func(i int, at time.Time) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), putTimeout)
			_, err := c.Client.Put(ctx, fmt.Sprintf("/w/%06d", i%writeKeys), val)
			cancel()
			took := time.Since(at)
			mu.Lock()
			puts = append(puts, put{at: at, took: took})
			if err != nil {
				failed++
			}
			mu.Unlock()
		}(i, at)
	}
	wg.Wait()
	return puts, failed
}

// hashRound is the operator's round (internal/controller/etcdcluster hashRound): every member's status, then
// HashKV of all members at once at the lowest revision they hold; it fails on differing hashes.
func hashRound(c *localetcd.Cluster) (time.Duration, error) {
	ctx := context.Background()
	start := time.Now()
	var rev int64
	for _, m := range c.Members {
		st, err := c.EC.Status(ctx, m.Client)
		if err != nil {
			return 0, err
		}
		if rev == 0 || st.Revision < rev {
			rev = st.Revision
		}
	}
	hashes := make([]etcdclient.KVHash, len(c.Members))
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes[i], errs[i] = c.EC.HashKV(ctx, m.Client, rev)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for i := range hashes {
		if errs[i] != nil {
			return 0, errs[i]
		}
		if hashes[i].Hash != hashes[0].Hash {
			return 0, fmt.Errorf("hashes differ at revision %d: %v", rev, hashes)
		}
	}
	return took, nil
}

func dbSize(t *testing.T, c *localetcd.Cluster) int64 {
	t.Helper()
	st, err := c.EC.Status(context.Background(), c.Members[0].Client)
	if err != nil {
		t.Fatal(err)
	}
	return st.DBSize
}

// tickerStarts are when the members started the ticker of etcd's periodic check after since, read
// from their logs.
func tickerStarts(t *testing.T, c *localetcd.Cluster, since time.Time) []time.Time {
	t.Helper()
	at := logged(t, c, "enabled corruption checking", since)
	if len(at) != len(c.Members) {
		t.Fatalf("%s: %d members logged their periodic check's start, want %d", c.Name, len(at), len(c.Members))
	}
	return at
}

// periodicChecks are when etcd's periodic corruption check finished, on any member (only the leader
// runs it), read from the members' logs.
func periodicChecks(t *testing.T, c *localetcd.Cluster) []time.Time {
	t.Helper()
	return logged(t, c, "finished peer corruption check", time.Time{})
}

// logged are the times at which the members logged msg after since, in order.
func logged(t *testing.T, c *localetcd.Cluster, msg string, since time.Time) []time.Time {
	t.Helper()
	var at []time.Time
	for _, m := range c.Members {
		f, err := os.Open(m.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				TS  string `json:"ts"`
				Msg string `json:"msg"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != msg {
				continue
			}
			ts, err := time.Parse("2006-01-02T15:04:05.999999Z0700", line.TS)
			if err != nil {
				t.Fatalf("%s: time %q: %v", m.LogPath, line.TS, err)
			}
			if ts.After(since) {
				at = append(at, ts)
			}
		}
		_ = f.Close()
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	return at
}
