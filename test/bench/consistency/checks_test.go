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
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
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

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return d
}

// TestBenchConsistencyChecksCost measures the write p99 of a steady open-loop writer against a
// cluster with the consistency checks on, divided by the same against a cluster without them, at
// the checks' own pace: the writer alternates between the two clusters in segments (off/on, then
// on/off, so drift in the machine's load hits both sides alike), and the on segments together last
// one operator interval (resources.ConsistencyCheckInterval) and contain one operator HashKV round
// and one etcd periodic corruption check. etcd's periodic check runs every
// resources.CorruptCheckInterval (three operator intervals), so the on side holds three times its
// real pace: the figure is an upper bound of what the checks cost.
func TestBenchConsistencyChecksCost(t *testing.T) {
	bin := os.Getenv("ETCD_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot, "bin", "etcd")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("etcd binary: %v (run `make envtest-assets`, or set ETCD_BIN)", err)
	}
	dbMiB := envInt(t, "BENCH_DB_MIB", 128)
	rate := envInt(t, "BENCH_RATE", 200)
	pairs := envInt(t, "BENCH_PAIRS", 5)
	segment := envDuration(t, "BENCH_SEGMENT", resources.ConsistencyCheckInterval/time.Duration(pairs))
	load0 := loadAvg()
	began := time.Now()

	off := newCluster(t, bin, "off", false)
	on := newCluster(t, bin, "on", true)
	off.start(t, 0)
	on.start(t, resources.CorruptCheckInterval)
	for _, c := range []*cluster{off, on} {
		took := preload(t, c, int64(dbMiB)<<20)
		t.Logf("%s: preloaded %d MiB in %s", c.name, dbMiB, took.Round(time.Second))
	}

	// The schedule: segment k starts at t0 + k·segment; pair p is (off, on) for even p, (on, off) for
	// odd p. The operator's round runs in the middle of the second on segment, etcd's periodic check
	// in the middle of the last but one.
	sides := make([]*cluster, 0, 2*pairs)
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
	off.stop(t)
	on.stop(t)
	restarted := time.Now()
	off.start(t, 0)
	on.start(t, interval)
	t.Logf("both clusters restarted in %s", time.Since(restarted).Round(time.Millisecond))
	tickers := on.tickerStarts(t, restarted)
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
		d, err := on.hashRound()
		if err != nil {
			t.Errorf("operator round in the schedule: %v", err)
			return
		}
		rounds = append(rounds, d)
		t.Logf("operator round in segment %d took %s", roundSeg, d.Round(time.Millisecond))
	}()
	lat := map[*cluster][]time.Duration{}
	var onPuts []put
	segP99 := map[*cluster][]float64{}
	failed := map[*cluster]int{}
	for k, c := range sides {
		from := t0.Add(time.Duration(k) * segment)
		puts, fails := c.write(from, from.Add(segment), rate)
		ls := make([]time.Duration, len(puts))
		for i, p := range puts {
			ls[i] = p.took
		}
		if c == on {
			onPuts = append(onPuts, puts...)
		}
		lat[c] = append(lat[c], ls...)
		failed[c] += fails
		segP99[c] = append(segP99[c], ms(quantile(ls, 0.99)))
		t.Logf("segment %d (%s): %d puts, p50 %.2f ms, p99 %.2f ms, %d failed", k, c.name, len(ls), ms(quantile(ls, 0.5)), ms(quantile(ls, 0.99)), fails)
	}
	<-roundDone
	load1 := loadAvg()

	// Evidence that the on side ran what it should: exactly one periodic check, inside an on segment.
	checks := on.periodicChecks(t)
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
	offP99d := quantile(lat[off], 0.99)
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
		msg := fmt.Sprintf("%d puts scheduled during %s: slowest %.0f ms, %d above the off side's p99", n, what, ms(worst), over)
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
		d, err := on.hashRound()
		if err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, d)
	}
	dbSize := on.dbSize(t)

	onP99, offP99 := ms(quantile(lat[on], 0.99)), ms(quantile(lat[off], 0.99))
	t.Logf("write p99: on %.2f ms (%d puts, %d failed), off %.2f ms (%d puts, %d failed): %.3f×; HashKV rounds %v on %.0f MiB; load %s → %s; %s in all",
		onP99, len(lat[on]), failed[on], offP99, len(lat[off]), failed[off], onP99/offP99, rounds, float64(dbSize)/(1<<20), load0, load1, time.Since(began).Round(time.Second))

	run := "'^" + t.Name() + "$'"
	cmd := framework.BenchCommand(settings, fmt.Sprintf("make bench-consistency BENCH_RUN=%s (go test -tags bench ./test/bench/consistency/ -run %s -count=1 -v)", run, run))
	date := time.Now().UTC().Format(time.RFC3339)
	g := goal
	p99 := framework.BenchResult{
		Metric: "consistency_checks_write_p99_latency", Value: framework.Round2(onP99), Unit: "ms", Baseline: framework.Round2(offP99), Ratio: framework.Round2(onP99 / offP99),
		Date: date, Command: cmd, Goal: &g, Samples: roundAll(segP99[on]), BaselineSamples: roundAll(segP99[off]),
		Notes: fmt.Sprintf("p99 of an open-loop writer's puts (%d/s, %d-byte values over %d keys, latency from each put's scheduled time, all three members as endpoints) "+
			"against 3 etcd %s processes on loopback with the operator's member arguments and a %d MiB database (%d-byte values), with the consistency checks on: "+
			"etcd's initial, compaction-hash and periodic checks (resources.ConsistencyArgs), the periodic one firing once, and one operator round (HashKV of every member at a common revision); "+
			"baseline: the same against a twin cluster without any check. The writer alternates between the two in %d segments of %s (off/on, then on/off), "+
			"so each side gets %s, one operator interval: the operator's round at its real pace, etcd's periodic check at three times its (an upper bound). "+
			"Value and baseline are the p99 of all puts of a side (%d and %d, %d and %d failed); the samples are each segment's p99. %s; %s. Load average %s at the start, %s at the end (2 shared cores)",
			rate, writeSize, writeKeys, versions.Default, dbMiB, valueSize, len(sides), segment, time.Duration(pairs)*segment,
			len(lat[on]), len(lat[off]), failed[on], failed[off], roundEffect, checkEffect, load0, load1),
	}
	p99.Min, p99.Max = bounds(p99.Samples)
	p99.BaselineMin, p99.BaselineMax = bounds(p99.BaselineSamples)
	var roundSecs []float64
	for _, d := range rounds {
		roundSecs = append(roundSecs, d.Seconds())
	}
	r := framework.Median(roundSecs)
	round := framework.BenchResult{
		Metric: "consistency_hashkv_round_seconds", Value: framework.Round2(r), Unit: "s", Ratio: framework.Round2(r), Date: date, Command: cmd, Samples: roundAll(roundSecs),
		Notes: fmt.Sprintf("one operator consistency round on the checked cluster of consistency_checks_write_p99_latency: the status of each of 3 members, then HashKV of all of them at once at the lowest revision they hold, as the operator does; "+
			"database %.0f MiB (%d MiB preloaded plus the writer's revisions); the first sample ran under the writer, the others right after it; a count",
			float64(dbSize)/(1<<20), dbMiB),
	}
	round.Min, round.Max = bounds(round.Samples)
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

// --- the clusters --------------------------------------------------------------------------------

type member struct {
	name, client, peer, metrics, dir, logPath string
	args                                      []string
	cmd                                       *exec.Cmd
	exited                                    chan struct{}
}

type cluster struct {
	name    string
	members []*member
	cl      *clientv3.Client
	ec      *etcdclient.Client
	bin     string
}

// newCluster lays out 3 members with the arguments MemberPod gives an operator's member (TLS off,
// addresses and data directory on this machine), with or without etcd's consistency checks.
func newCluster(t *testing.T, bin, name string, checks bool) *cluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", UID: types.UID("bench-" + name)}}
	c.Spec = etcdv1alpha1.EtcdClusterSpec{
		Replicas: 3, Version: versions.Default,
		Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("8Gi")},
		TLS:     etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled},
		Etcd: etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: etcdv1alpha1.DefaultSnapshotCount,
			AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"},
	}
	cl := &cluster{name: name, bin: bin}
	var names, initial []string
	for i := 0; i < 3; i++ {
		m := &member{name: fmt.Sprintf("%s-%d", name, i), client: "http://" + loopback.FreeAddr(t), peer: "http://" + loopback.FreeAddr(t),
			metrics: "http://" + loopback.FreeAddr(t), dir: t.TempDir()}
		m.logPath = filepath.Join(m.dir, "etcd.log")
		cl.members = append(cl.members, m)
		names = append(names, m.name)
		initial = append(initial, m.name+"="+m.peer)
	}
	drop := map[string]bool{}
	if !checks {
		for _, a := range resources.ConsistencyArgs(versions.Default) {
			flag, _, _ := strings.Cut(a, "=")
			drop[flag] = true
		}
	}
	for _, m := range cl.members {
		pod := resources.MemberPod(c, resources.MemberPodInput{Member: m.name, Image: "i", Version: versions.Default, InitialCluster: names, Bootstrap: true})
		local := map[string]string{
			"--data-dir": filepath.Join(m.dir, "data"), "--listen-client-urls": m.client, "--advertise-client-urls": m.client,
			"--listen-peer-urls": m.peer, "--initial-advertise-peer-urls": m.peer, "--initial-cluster": strings.Join(initial, ","),
			"--listen-metrics-urls": m.metrics,
		}
		for _, a := range pod.Spec.Containers[0].Args {
			flag, _, _ := strings.Cut(a, "=")
			if drop[flag] {
				continue
			}
			if v, ok := local[flag]; ok {
				a = flag + "=" + v
			}
			m.args = append(m.args, a)
		}
	}
	return cl
}

// start starts every member at once (on existing data after the first time) and waits until all
// are healthy; checkInterval, when not 0, replaces the interval of etcd's periodic check.
func (c *cluster) start(t *testing.T, checkInterval time.Duration) {
	t.Helper()
	for _, m := range c.members {
		args := slices.Clone(m.args)
		for i, a := range args {
			if checkInterval != 0 && strings.HasPrefix(a, "--corrupt-check-time=") {
				args[i] = "--corrupt-check-time=" + checkInterval.String()
			}
		}
		log, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		m.cmd = exec.Command(c.bin, args...)
		m.cmd.Stdout, m.cmd.Stderr = log, log
		if err := m.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", m.name, err)
		}
		m.exited = make(chan struct{})
		go func(cmd *exec.Cmd, exited chan struct{}) {
			_ = cmd.Wait()
			_ = log.Close()
			close(exited)
		}(m.cmd, m.exited)
	}
	t.Cleanup(func() { c.stop(t) })
	deadline := time.Now().Add(time.Minute)
	for _, m := range c.members {
		for !healthy(m.metrics) {
			select {
			case <-m.exited:
				t.Fatalf("%s exited; log in %s", m.name, m.logPath)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not healthy after a minute; log in %s", m.name, m.logPath)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var endpoints []string
	for _, m := range c.members {
		endpoints = append(endpoints, m.client)
	}
	var err error
	if c.cl, err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		t.Fatal(err)
	}
	if c.ec, err = etcdclient.New(endpoints, nil); err != nil {
		t.Fatal(err)
	}
}

func healthy(metrics string) bool {
	resp, err := http.Get(metrics + "/health")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop stops every member at once (SIGTERM, as the kubelet does) and waits for them.
func (c *cluster) stop(t *testing.T) {
	t.Helper()
	if c.cl != nil {
		_ = c.cl.Close()
		_ = c.ec.Close()
		c.cl, c.ec = nil, nil
	}
	for _, m := range c.members {
		if m.cmd != nil && m.cmd.Process != nil {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, m := range c.members {
		if m.exited == nil {
			continue
		}
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
	}
}

// preload writes bytes of distinct keys with valueSize values, 64 puts in flight.
func preload(t *testing.T, c *cluster, bytes int64) time.Duration {
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
				_, err := c.cl.Put(ctx, fmt.Sprintf("/preload/%08d", i), string(val))
				cancel()
				if err != nil {
					errs <- fmt.Errorf("preload %s: %w", c.name, err)
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
func (c *cluster) write(from, to time.Time, rate int) ([]put, int) {
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
			_, err := c.cl.Put(ctx, fmt.Sprintf("/w/%06d", i%writeKeys), val)
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

// hashRound is the operator's round (internal/controller hashRound): every member's status, then
// HashKV of all members at once at the lowest revision they hold; it fails on differing hashes.
func (c *cluster) hashRound() (time.Duration, error) {
	ctx := context.Background()
	start := time.Now()
	var rev int64
	for _, m := range c.members {
		st, err := c.ec.Status(ctx, m.client)
		if err != nil {
			return 0, err
		}
		if rev == 0 || st.Revision < rev {
			rev = st.Revision
		}
	}
	hashes := make([]etcdclient.KVHash, len(c.members))
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes[i], errs[i] = c.ec.HashKV(ctx, m.client, rev)
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

func (c *cluster) dbSize(t *testing.T) int64 {
	t.Helper()
	st, err := c.ec.Status(context.Background(), c.members[0].client)
	if err != nil {
		t.Fatal(err)
	}
	return st.DBSize
}

// tickerStarts are when the members started the ticker of etcd's periodic check after since, read
// from their logs.
func (c *cluster) tickerStarts(t *testing.T, since time.Time) []time.Time {
	t.Helper()
	at := c.logged(t, "enabled corruption checking", since)
	if len(at) != len(c.members) {
		t.Fatalf("%s: %d members logged their periodic check's start, want %d", c.name, len(at), len(c.members))
	}
	return at
}

// periodicChecks are when etcd's periodic corruption check finished, on any member (only the leader
// runs it), read from the members' logs.
func (c *cluster) periodicChecks(t *testing.T) []time.Time {
	t.Helper()
	return c.logged(t, "finished peer corruption check", time.Time{})
}

// logged are the times at which the members logged msg after since, in order.
func (c *cluster) logged(t *testing.T, msg string, since time.Time) []time.Time {
	t.Helper()
	var at []time.Time
	for _, m := range c.members {
		f, err := os.Open(m.logPath)
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
				t.Fatalf("%s: time %q: %v", m.logPath, line.TS, err)
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

// --- figures -------------------------------------------------------------------------------------

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = framework.Round2(x)
	}
	return out
}

func bounds(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}

// loadAvg is the machine's 1-minute load average: the benchmark shares its cores.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(raw))[0]
}
