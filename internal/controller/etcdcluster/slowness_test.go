package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/latency"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// fakeDisks plays members' cumulative disk histograms: each tick, every member makes 200 WAL fsyncs
// and 100 backend commits, fast ones in the 2 ms bucket and, for the members in slow, in the 512 ms one.
type fakeDisks struct {
	wal, commit map[string][3]uint64 // cumulative counts at 2 ms, 512 ms, +Inf
	slow        map[string]bool
	down        map[string]bool
	// perTick overrides the 200 WAL fsyncs each member makes per tick (a lighter load).
	perTick uint64
}

var fakeBounds = []float64{0.002, 0.512}

func (f *fakeDisks) tick() {
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		add := func(h [3]uint64, n uint64) [3]uint64 {
			if !f.slow[ip] {
				h[0] += n
			}
			h[1] += n
			h[2] += n
			return h
		}
		n := uint64(200)
		if f.perTick > 0 {
			n = f.perTick
		}
		f.wal[ip], f.commit[ip] = add(f.wal[ip], n), add(f.commit[ip], n/2)
	}
}

func (f *fakeDisks) read(_ context.Context, url string) (etcdclient.DiskLatency, error) {
	for ip := range f.wal {
		if url == naming.MetricsURL(ip) {
			if f.down[ip] {
				return etcdclient.DiskLatency{}, errors.New("connection refused")
			}
			h := func(c [3]uint64) latency.Histogram {
				return latency.Histogram{Bounds: fakeBounds, Counts: []uint64{c[0], c[1]}, Count: c[2]}
			}
			return etcdclient.DiskLatency{WALFsync: h(f.wal[ip]), BackendCommit: h(f.commit[ip])}, nil
		}
	}
	return etcdclient.DiskLatency{}, errors.New("no such member")
}

// A member is slow only after two slow windows in a row, each measured from two readings of its own
// histograms: not on the first reading, not again before the window is long enough, not across a
// restart or a long gap (which keeps a verdict as it was), and no longer once two windows in a row show it fast; a pass that cannot
// read it leaves its verdict as it was. slowSince follows, and the Warning
// event is sent once per episode.
func TestSlownessWindows(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns"}}
	c.Spec.Maintenance.SlowMemberReplacement.After = "1m"
	o := &observation{pods: map[string]*corev1.Pod{}, status: map[uint64]etcdclient.Status{}, names: map[uint64]string{}, ids: map[string]uint64{}, failing: map[uint64]string{},
		etcd: &etcdclient.Client{}} // a marker: the member list answered
	for i, name := range []string{"etcd-0", "etcd-1", "etcd-2"} {
		id := uint64(i + 1)
		o.names[id], o.ids[name], o.status[id] = name, id, etcdclient.Status{}
		o.pods[name] = &corev1.Pod{Status: corev1.PodStatus{PodIP: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}[i]}}
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: name})
	}
	disks := &fakeDisks{wal: map[string][3]uint64{}, commit: map[string][3]uint64{}, slow: map[string]bool{"10.0.0.2": true}, down: map[string]bool{}}
	rec := record.NewFakeRecorder(10)
	r := &EtcdClusterReconciler{Recorder: rec}
	cm := &clusterMemory{}

	pass := func(at time.Duration) (slowSince *metav1.Time, why string) {
		t.Helper()
		disks.tick()
		p := &pass{r: r, c: c, mem: cm, now: t0.Add(at), obs: o}
		o.slow = nil
		p.observeSlowness(context.Background(), o, disks.read)
		p.trackSlowness()
		return c.Status.Members[1].SlowSince, o.slow[2]
	}
	expectSlow := func(step string, since *metav1.Time, why string, want bool) {
		t.Helper()
		if (since != nil) != want || (why != "") != want {
			t.Fatalf("%s: slowSince %v, verdict %q, want slow=%v", step, since, why, want)
		}
		for _, m := range []int{0, 2} {
			if c.Status.Members[m].SlowSince != nil {
				t.Fatalf("%s: fast member %s marked slow", step, c.Status.Members[m].Name)
			}
		}
	}

	since, why := pass(0)
	expectSlow("first reading: no window yet", since, why, false)
	since, why = pass(10 * time.Second)
	expectSlow("10 s later: window too short, not even read", since, why, false)
	since, why = pass(30 * time.Second)
	expectSlow("one slow window is not enough", since, why, false)
	since, why = pass(60 * time.Second)
	expectSlow("a second slow window in a row", since, why, true)
	if !strings.Contains(why, "WAL fsync p99 ") || !strings.Contains(why, "against a median of") || !strings.Contains(why, "over the last 30s (2 windows in a row)") {
		t.Fatalf("verdict without the figures: %q", why)
	}
	first := since.Time
	since, _ = pass(70 * time.Second)
	expectSlow("between windows the verdict stands", since, o.slow[2], true)
	if !since.Time.Equal(first) {
		t.Fatalf("slowSince moved from %s to %s", first, since.Time)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning MemberSlow etcd-1 is slow: WAL fsync p99") || !strings.Contains(e, "policy is Report") {
			t.Fatalf("event %q", e)
		}
	default:
		t.Fatal("no Warning event for the slow member")
	}
	if len(rec.Events) != 0 {
		t.Fatalf("%d more events: one per episode", len(rec.Events))
	}

	// The member restarts: its counts start again from zero, which is no window, and the streak
	// starts again.
	disks.wal["10.0.0.2"], disks.commit["10.0.0.2"] = [3]uint64{}, [3]uint64{}
	since, why = pass(90 * time.Second)
	expectSlow("across a restart", since, why, false)
	since, why = pass(120 * time.Second)
	expectSlow("one slow window after the restart", since, why, false)
	since, why = pass(150 * time.Second)
	expectSlow("slow again after the restart", since, why, true)

	// The operator cannot read it, then reads it without a baseline, then etcd reports it failing: no
	// new evidence, so the verdict stands and slowSince, the clock of slowMemberReplacement.after, does
	// not move. A disk that freezes a member most of the time makes its reads fail now and then.
	slowFrom := since.Time
	disks.down["10.0.0.2"] = true
	since, why = pass(180 * time.Second)
	expectSlow("unreadable", since, why, true)
	disks.down["10.0.0.2"] = false
	since, why = pass(210 * time.Second)
	expectSlow("read again, with no baseline to measure from", since, why, true)
	o.failing[2] = "unreachable from the leader"
	since, why = pass(240 * time.Second)
	expectSlow("reported failing", since, why, true)
	delete(o.failing, 2)
	if !since.Time.Equal(slowFrom) {
		t.Fatalf("slowSince moved from %s to %s while the member had no window", slowFrom, since.Time)
	}

	// Readings further apart than maxSlowWindow describe nothing current: they are the next baseline,
	// and the verdict stands (a gap is no evidence that the disk recovered).
	since, why = pass(240*time.Second + maxSlowWindow + time.Second)
	expectSlow("after a long gap", since, why, true)
	if !since.Time.Equal(slowFrom) {
		t.Fatalf("slowSince moved from %s to %s across a gap", slowFrom, since.Time)
	}

	// Fast again: the next window clears it.
	pass(270*time.Second + maxSlowWindow)
	since, why = pass(300*time.Second + maxSlowWindow)
	expectSlow("slow before it recovers", since, why, true)
	disks.slow["10.0.0.2"] = false
	since, why = pass(330*time.Second + maxSlowWindow)
	expectSlow("one fast window does not clear it", since, why, true)
	disks.slow["10.0.0.2"] = true
	since, why = pass(360*time.Second + maxSlowWindow)
	expectSlow("slow again", since, why, true)
	disks.slow["10.0.0.2"] = false
	pass(390*time.Second + maxSlowWindow)
	since, why = pass(420*time.Second + maxSlowWindow)
	expectSlow("two fast windows in a row clear it", since, why, false)

	// Under a light load a window grows until every member made enough fsyncs (or fullSlowWindow).
	disks.slow["10.0.0.2"], disks.perTick = true, 20
	base := 420*time.Second + maxSlowWindow
	for _, at := range []time.Duration{30, 60} {
		since, why = pass(base + at*time.Second)
		expectSlow(fmt.Sprintf("a thin window of %ds", at), since, why, false)
	}
	if cm.slowness.streaks[2] != 0 {
		t.Fatalf("a thin window was judged: streak %d", cm.slowness.streaks[2])
	}
	since, why = pass(base + 90*time.Second)
	expectSlow("the first full window", since, why, false)
	for _, at := range []time.Duration{120, 150, 180} {
		since, why = pass(base + at*time.Second)
	}
	expectSlow("the second full window", since, why, true)
	if !strings.Contains(why, "over the last 1m30s (2 windows in a row)") {
		t.Fatalf("verdict %q, want it over the 90 s window", why)
	}

	// Once it is no longer a member, nothing of it is kept.
	delete(o.names, 2)
	delete(o.status, 2)
	pass(base + 270*time.Second)
	if _, kept := cm.slowness.streaks[2]; kept || cm.slowness.slow[2] != "" {
		t.Fatalf("a removed member's verdict is kept: streak %v, verdict %q", cm.slowness.streaks, cm.slowness.slow[2])
	}
}

// An idle cluster is looked at again when a slow member's replacement falls due, not up to
// requeueIdle later; a member already due, or the Report policy, leaves the idle pace as it is.
func TestIdleRequeueMeetsTheSlowReplacementDeadline(t *testing.T) {
	now := time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	for _, tc := range []struct {
		name   string
		policy string
		since  []*metav1.Time
		want   time.Duration
	}{
		{"no slow member", etcdv1alpha1.SlowMemberReplace, []*metav1.Time{nil, nil}, requeueIdle},
		{"due in 10 s", etcdv1alpha1.SlowMemberReplace, []*metav1.Time{nil, at(-20 * time.Second)}, 10 * time.Second},
		{"the first of two", etcdv1alpha1.SlowMemberReplace, []*metav1.Time{at(-5 * time.Second), at(-25 * time.Second)}, 5 * time.Second},
		{"due later than the idle pace", etcdv1alpha1.SlowMemberReplace, []*metav1.Time{at(0)}, requeueIdle},
		{"already due", etcdv1alpha1.SlowMemberReplace, []*metav1.Time{at(-time.Minute)}, requeueIdle},
		{"Report policy", etcdv1alpha1.SlowMemberReport, []*metav1.Time{at(-20 * time.Second)}, requeueIdle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1alpha1.EtcdCluster{}
			c.Spec.Maintenance.SlowMemberReplacement = etcdv1alpha1.SlowMemberReplacementSpec{Policy: tc.policy, After: "30s"}
			for i, since := range tc.since {
				c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: fmt.Sprintf("etcd-%d", i), SlowSince: since})
			}
			p := &pass{c: c, mem: &clusterMemory{}, now: now}
			if got := p.idleRequeue(); got != tc.want {
				t.Fatalf("idle requeue %s, want %s", got, tc.want)
			}
		})
	}
}

// Issue 30 item 6. A pass whose member list fails sees no member at all: that is no evidence that a
// slow member recovered or left, so its verdict and slowSince (the clock of
// slowMemberReplacement.after) stand, through short and long outages alike, and no second Warning
// is sent. Only a member list that answers without the member forgets it.
func TestSlowVerdictSurvivesAFailedMemberList(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns"}}
	c.Spec.Maintenance.SlowMemberReplacement.After = "10m"
	names := []string{"etcd-0", "etcd-1", "etcd-2"}
	ips := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	for _, name := range names {
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: name})
	}
	disks := &fakeDisks{wal: map[string][3]uint64{}, commit: map[string][3]uint64{}, slow: map[string]bool{"10.0.0.2": true}, down: map[string]bool{}}
	rec := record.NewFakeRecorder(10)
	r := &EtcdClusterReconciler{Recorder: rec}
	cm := &clusterMemory{}
	// observed is what a pass sees: every member listed (or all but those in gone), or, when listed is
	// false, a member list that failed (pods, but no etcd view at all).
	observed := func(listed bool, gone ...string) *observation {
		o := &observation{pods: map[string]*corev1.Pod{}, status: map[uint64]etcdclient.Status{}, names: map[uint64]string{}, ids: map[string]uint64{}, failing: map[uint64]string{}}
		for i, name := range names {
			o.pods[name] = &corev1.Pod{Status: corev1.PodStatus{PodIP: ips[i]}}
			if !listed || slices.Contains(gone, name) {
				continue
			}
			id := uint64(i + 1)
			o.names[id], o.ids[name], o.status[id] = name, id, etcdclient.Status{}
		}
		if listed {
			o.etcd = &etcdclient.Client{} // a marker: the member list answered
		}
		return o
	}
	// pass runs the slowness steps of a reconcile: observeSlowness only once etcd answered.
	pass := func(at time.Duration, o *observation) *metav1.Time {
		t.Helper()
		disks.tick()
		p := &pass{r: r, c: c, mem: cm, now: t0.Add(at), obs: o}
		if o.etcd != nil {
			p.observeSlowness(context.Background(), o, disks.read)
		}
		p.trackSlowness()
		return c.Status.Members[1].SlowSince
	}
	for _, at := range []time.Duration{0, 30, 60} {
		pass(at*time.Second, observed(true))
	}
	since := pass(90*time.Second, observed(true))
	if since == nil {
		t.Fatal("etcd-1 not reported slow after two slow windows")
	}
	first := since.Time
	for _, step := range []struct {
		what string
		at   time.Duration
		o    *observation
	}{
		{"the member list fails", 100 * time.Second, observed(false)},
		{"it answers again", 120 * time.Second, observed(true)},
		{"it fails for longer than a slowness window may last", 130 * time.Second, observed(false)},
		{"still failing", 130*time.Second + maxSlowWindow, observed(false)},
		{"it answers again after the long outage: a new baseline, no window", 140*time.Second + maxSlowWindow, observed(true)},
	} {
		since = pass(step.at, step.o)
		if since == nil || !since.Time.Equal(first) {
			t.Fatalf("%s: slowSince %v, want it to stand at %s", step.what, since, first)
		}
		if step.o.etcd != nil && step.o.slow[2] == "" {
			t.Fatalf("%s: the verdict on etcd-1 was dropped", step.what)
		}
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d Warning events, want one for the whole episode", n)
	}
	if since = pass(170*time.Second+maxSlowWindow, observed(true, "etcd-1")); since != nil {
		t.Fatalf("etcd-1 left the cluster (a member list without it) but is still slow since %s", since)
	}
	if _, kept := cm.slowness.streaks[2]; kept || cm.slowness.slow[2] != "" {
		t.Fatalf("a removed member's verdict is kept: streak %v, verdict %q", cm.slowness.streaks, cm.slowness.slow[2])
	}
}
