package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/latency"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// fakeRTT plays the members' peer round-trip-time histograms: each tick, every member observes one
// round trip to each peer, at rtt.
type fakeRTT struct {
	counts map[string][2]uint64 // member IP → cumulative counts at 1 ms and 512 ms; +Inf = the sum
	rtt    time.Duration
	down   map[string]bool
}

func (f *fakeRTT) tick() {
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		c := f.counts[ip]
		if f.rtt <= time.Millisecond {
			c[0]++
		} else {
			c[1]++
		}
		f.counts[ip] = c
	}
}

func (f *fakeRTT) read(_ context.Context, url string) (map[string]latency.Histogram, error) {
	for ip, c := range f.counts {
		if url == naming.MetricsURL(ip) {
			if f.down[ip] {
				return nil, errors.New("connection refused")
			}
			return map[string]latency.Histogram{"a1": {Bounds: []float64{0.001, 0.512}, Counts: []uint64{c[0], c[0] + c[1]}, Count: c[0] + c[1]}}, nil
		}
	}
	return nil, errors.New("no such member")
}

// Auto-tuning measures windows of a minute between two readings: the write rate from the highest
// applied index, the peer round-trip time from the members' histograms. Not before a minute, never
// across a gap the operator was away for, and never across a cluster rebuilt (its index went down).
func TestTuningWindows(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns"}}
	o := &observation{pods: map[string]*corev1.Pod{}, status: map[uint64]etcdclient.Status{}, names: map[uint64]string{}, ids: map[string]uint64{}}
	for i, name := range []string{"etcd-0", "etcd-1", "etcd-2"} {
		id := uint64(i + 1)
		o.names[id], o.ids[name] = name, id
		o.pods[name] = &corev1.Pod{Status: corev1.PodStatus{PodIP: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}[i]}}
	}
	rtt := &fakeRTT{counts: map[string][2]uint64{}, rtt: 300 * time.Millisecond, down: map[string]bool{}}
	cm := &clusterMemory{}
	applied := uint64(1000)
	pass := func(at time.Duration, writes uint64) []planner.TuningWindow {
		t.Helper()
		applied += writes
		for id := range o.names {
			// followers lag a little: the rate rests on the highest index
			o.status[id] = etcdclient.Status{RaftAppliedIndex: applied - id}
		}
		rtt.tick()
		p := &pass{c: c, mem: cm, now: t0.Add(at), obs: o}
		p.observeTuning(context.Background(), o, rtt.read)
		return cm.tuning.windows
	}
	if w := pass(0, 0); len(w) != 0 {
		t.Fatalf("first reading: %d windows", len(w))
	}
	if w := pass(30*time.Second, 3000); len(w) != 0 {
		t.Fatalf("30 s later: %d windows, want none before a minute", len(w))
	}
	w := pass(60*time.Second, 3000)
	if len(w) != 1 || w[0].Length != time.Minute || w[0].WriteRate != 100 {
		t.Fatalf("a minute later: %+v, want one window of a minute at 100 entries/s", w)
	}
	if w[0].PeerRTT < 200*time.Millisecond || w[0].PeerRTT > 512*time.Millisecond {
		t.Fatalf("peer RTT %s, want the 512 ms bucket's p99", w[0].PeerRTT)
	}
	rtt.down["10.0.0.1"], rtt.down["10.0.0.2"], rtt.down["10.0.0.3"] = true, true, true
	w = pass(2*time.Minute, 1200)
	if len(w) != 2 || w[1].WriteRate != 20 || w[1].PeerRTT != 0 {
		t.Fatalf("second window without any member's histograms: %+v, want 20 entries/s and no RTT", w)
	}
	w = pass(3*time.Minute, 600)
	if len(w) != 2 || w[1].WriteRate != 10 {
		t.Fatalf("only the last two windows are kept: %+v", w)
	}
	if w := pass(6*time.Minute, 600); len(w) != 0 {
		t.Fatalf("after a gap of 3 minutes: %+v, want a fresh start", w)
	}
	applied = 10
	if w := pass(7*time.Minute, 0); len(w) != 0 {
		t.Fatalf("after the applied index went down (a rebuilt cluster): %+v, want a fresh start", w)
	}
}

// status.tuning shows every tunable option with its source; a tuned value keeps its evidence until
// the user sets the option, and a tuned duration never outlives a switch to revision compaction.
func TestRecordTuning(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{}
	c.Spec.Etcd.ElectionTimeoutMillis = 2000
	recordTuning(c, nil, t0)
	want := "heartbeatIntervalMillis=100(default) electionTimeoutMillis=2000(user) snapshotCount=10000(default) autoCompactionRetention=1h(default)"
	if got := tuningString(c); got != want || c.Status.Tuning.LastChange != nil {
		t.Fatalf("nothing tuned: %s (last change %v), want %s", got, c.Status.Tuning.LastChange, want)
	}
	recordTuning(c, []planner.TunedChange{
		{Name: "snapshotCount", From: "10000", To: "40000", Evidence: "write rate 120.0 then 130.0 entries/s"},
		{Name: "autoCompactionRetention", From: "1h", To: "18m", Evidence: "write rate"},
	}, t0)
	want = "heartbeatIntervalMillis=100(default) electionTimeoutMillis=2000(user) snapshotCount=40000(tuned) autoCompactionRetention=18m(tuned)"
	if got := tuningString(c); got != want || c.Status.Tuning.LastChange == nil || !c.Status.Tuning.LastChange.Time.Equal(t0) {
		t.Fatalf("tuned: %s (last change %v), want %s", got, c.Status.Tuning.LastChange, want)
	}
	if e := c.Status.Tuning.Values[2].Evidence; !strings.Contains(e, "write rate 120.0") {
		t.Fatalf("evidence %q", e)
	}
	recordTuning(c, nil, t0.Add(time.Hour))
	if got := tuningString(c); got != want || !c.Status.Tuning.LastChange.Time.Equal(t0) {
		t.Fatalf("a pass without changes: %s, want %s, last change kept", got, want)
	}
	c.Spec.Etcd.SnapshotCount, c.Spec.Etcd.AutoCompactionMode = 25000, etcdv1alpha1.CompactionRevision
	recordTuning(c, nil, t0.Add(time.Hour))
	want = "heartbeatIntervalMillis=100(default) electionTimeoutMillis=2000(user) snapshotCount=25000(user) autoCompactionRetention=10000(default)"
	if got := tuningString(c); got != want {
		t.Fatalf("user set the snapshot count and revision compaction: %s, want %s", got, want)
	}
	if e := c.Status.Tuning.Values[2].Evidence; e != "" {
		t.Fatalf("a user value keeps tuning evidence %q", e)
	}
}

func tuningString(c *etcdv1alpha1.EtcdCluster) string {
	var parts []string
	for _, v := range c.Status.Tuning.Values {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", v.Name, v.Value, v.Source))
	}
	return strings.Join(parts, " ")
}

// A cluster that leaves the tunable options unset gets auto-tuning by default, runs the defaults, and
// says so in status.tuning; an option set in the spec is the user's.
func TestTunableOptionsLeftUnsetRunTheDefaults(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.SnapshotCount = 25000 })
	stored := operatortest.Get(t, c)
	if stored.Spec.Maintenance.AutoTuning != "Enabled" {
		t.Errorf("spec.maintenance.autoTuning = %q, want the default Enabled", stored.Spec.Maintenance.AutoTuning)
	}
	if o := stored.Spec.Etcd; o.HeartbeatIntervalMillis != 100 || o.ElectionTimeoutMillis != 1000 || o.AutoCompactionRetention != "1h" {
		t.Errorf("the API server did not fill in the defaults an operator of the previous release reads: %+v", o)
	}
	operatortest.Eventually(t, "member pods with the defaults and the user's snapshot count", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		for _, p := range pods.Items {
			args := strings.Join(p.Spec.Containers[0].Args, " ")
			for _, want := range []string{"--heartbeat-interval=100", "--election-timeout=1000", "--snapshot-count=25000", "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"} {
				if !strings.Contains(args, want) {
					return fmt.Errorf("pod %s args lack %q: %s", p.Name, want, args)
				}
			}
		}
		return nil
	})
	operatortest.Eventually(t, "status.tuning", func() error {
		want := "heartbeatIntervalMillis=100(default) electionTimeoutMillis=1000(default) snapshotCount=25000(user) autoCompactionRetention=1h(default)"
		if got := tuningString(operatortest.Get(t, c)); got != want {
			return fmt.Errorf("status.tuning %s, want %s", got, want)
		}
		return nil
	})

	// A merge patch carries no resourceVersion, so the operator's own status writes cannot turn the
	// expected refusal into a conflict.
	cur := operatortest.Get(t, c)
	bad := cur.DeepCopy()
	bad.Spec.Maintenance.AutoTuning = "Sometimes"
	if err := k8s.Patch(ctx, bad, client.MergeFrom(cur)); err == nil || !strings.Contains(err.Error(), "Enabled") {
		t.Fatalf("autoTuning Sometimes: %v, want a refusal naming the values", err)
	}
}
