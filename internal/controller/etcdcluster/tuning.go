package etcdcluster

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/latency"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// tuningWindow is the length of one auto-tuning measurement; planner.Tune wants two in a row.
const tuningWindow = time.Minute

// tuningReading is one reading of what auto-tuning measures: the highest index any member applied,
// and each member's peer round-trip-time histograms (by member ID, then peer ID in hex).
type tuningReading struct {
	at      time.Time
	applied uint64
	rtt     map[uint64]map[string]latency.Histogram
}

// observeTuning, called once etcd answered, takes a reading every tuningWindow and turns the last
// one and this one into a window: the write rate (raft entries applied per second) and the highest
// peer round-trip time (p99) any member measured. Readings further apart than maxObservationGap, or
// an applied index that went down (the cluster was rebuilt), start over. Kept in the cluster's memory:
// an operator restart costs two windows. read is etcdclient.ReadPeerRTT outside tests.
func (p *pass) observeTuning(ctx context.Context, o *observation, read func(context.Context, string) (map[string]latency.Histogram, error)) {
	h := &p.mem.tuning
	if !h.due(p.now) {
		return
	}
	now := &tuningReading{at: p.now, rtt: readMemberMetrics(ctx, o, "peer round-trip times", func(uint64) bool { return true }, read)}
	for _, st := range o.status {
		now.applied = max(now.applied, st.RaftAppliedIndex)
	}
	h.record(now)
}

// tuningHistory is the auto-tuning history kept across passes: the last reading (base), the start
// of the next window, and the last windows measured, oldest first.
type tuningHistory struct {
	base    *tuningReading
	windows []planner.TuningWindow
}

// due says whether a reading is to be taken at now: once per tuningWindow.
func (h *tuningHistory) due(now time.Time) bool {
	return h.base == nil || now.Sub(h.base.at) >= tuningWindow
}

// record makes now the base and the time since the last base a window, keeping the last two;
// readings further apart than maxObservationGap, or an applied index that went down (the cluster was
// rebuilt), start over.
func (h *tuningHistory) record(now *tuningReading) {
	prev := h.base
	h.base = now
	if prev == nil || now.at.Sub(prev.at) > maxObservationGap || now.applied < prev.applied || now.applied == 0 {
		h.windows = nil
		return
	}
	h.windows = append(h.windows, tuningWindowBetween(prev, now))
	if n := len(h.windows); n > 2 {
		h.windows = h.windows[n-2:]
	}
}

// idleRequeue is when an idle cluster is looked at again: requeueIdle, or sooner when the next
// auto-tuning reading falls due, so that its windows last a minute rather than up to 90 s, or when a
// slow member's replacement falls due, so that it is replaced at the time its event announced rather
// than up to requeueIdle later, or while a consistency round runs, so that its verdict is recorded
// soon after it ends.
func (p *pass) idleRequeue() time.Duration {
	next := requeueIdle
	sooner := func(due time.Duration) {
		if due > 0 && due < next {
			next = due
		}
	}
	if b := p.mem.tuning.base; b != nil {
		sooner(b.at.Add(tuningWindow).Sub(p.now))
	}
	sooner(slowReplacementDue(p.c, p.now))
	if consistencyOf(p.c).inFlight() {
		sooner(requeueBusy)
	}
	return next
}

// tuningWindowBetween is what happened between two readings. Members read only once, or restarted
// in between (their histograms went down), leave no round-trip time.
func tuningWindowBetween(prev, now *tuningReading) planner.TuningWindow {
	length := now.at.Sub(prev.at)
	w := planner.TuningWindow{Length: length, WriteRate: float64(now.applied-prev.applied) / length.Seconds()}
	for id, peers := range now.rtt {
		for peer, h := range peers {
			before, ok := prev.rtt[id][peer]
			if !ok {
				continue
			}
			d, err := h.Since(before)
			if err != nil || d.Count == 0 {
				continue
			}
			if q := d.Quantile(0.99); !math.IsNaN(q) {
				w.PeerRTT = max(w.PeerRTT, time.Duration(q*float64(time.Second)))
			}
		}
	}
	return w
}

// tuningInput is what planner.Tune decides from: the options the members are told to run with, which
// of them the user set, and the windows measured.
func (p *pass) tuningInput() *planner.Tuning {
	c := p.c
	o := resources.EtcdOptions(c)
	t := &planner.Tuning{
		Enabled:       c.Spec.Maintenance.AutoTuning != etcdv1alpha1.AutoTuningDisabled, // "": stored before the field existed
		UserSet:       map[string]bool{},
		Heartbeat:     time.Duration(o.HeartbeatIntervalMillis) * time.Millisecond,
		Election:      time.Duration(o.ElectionTimeoutMillis) * time.Millisecond,
		SnapshotCount: o.SnapshotCount,
		Windows:       p.mem.tuning.windows,
	}
	for _, name := range tunables {
		t.UserSet[name] = resources.UserSet(c, name)
	}
	if o.AutoCompactionMode == etcdv1alpha1.CompactionPeriodic {
		if d, err := time.ParseDuration(o.AutoCompactionRetention); err == nil {
			t.Retention = d
		} else if h, err := strconv.Atoi(o.AutoCompactionRetention); err == nil {
			t.Retention = time.Duration(h) * time.Hour // etcd reads a bare number as hours
		}
	}
	if lc := c.Status.Tuning.LastChange; lc != nil {
		at := lc.Time
		t.LastChange = &at
	}
	return t
}

// tunables are the options auto-tuning may set, in the order status.tuning lists them.
var tunables = []string{etcdv1alpha1.TunableHeartbeatInterval, etcdv1alpha1.TunableElectionTimeout, etcdv1alpha1.TunableSnapshotCount, etcdv1alpha1.TunableAutoCompactionRetention}

// recordTuning shows in status.tuning the value of every tunable option and its source; a tuned value
// keeps the evidence it was tuned on. changes, when not nil, are new tuned values (planner.Retune).
func recordTuning(c *etcdv1alpha1.EtcdCluster, changes []planner.TunedChange, now time.Time) {
	tuned := map[string]etcdv1alpha1.TunedValue{}
	for _, t := range c.Status.Tuning.Values {
		if t.Source == etcdv1alpha1.TuningSourceTuned {
			tuned[t.Name] = t
		}
	}
	for _, ch := range changes {
		tuned[ch.Name] = etcdv1alpha1.TunedValue{Name: ch.Name, Value: ch.To, Source: etcdv1alpha1.TuningSourceTuned, Evidence: truncate(ch.Evidence, 512)}
	}
	if c.Spec.Etcd.AutoCompactionMode == etcdv1alpha1.CompactionRevision {
		// A tuned retention is a duration: it means nothing to revision compaction, and must not
		// come back as a count of hours if the mode is switched back.
		delete(tuned, etcdv1alpha1.TunableAutoCompactionRetention)
	}
	if len(changes) > 0 {
		c.Status.Tuning.LastChange = &metav1.Time{Time: now}
	}
	c.Status.Tuning.Values = c.Status.Tuning.Values[:0]
	for _, name := range tunables {
		c.Status.Tuning.Values = append(c.Status.Tuning.Values, etcdv1alpha1.TunedValue{Name: name, Source: etcdv1alpha1.TuningSourceDefault})
	}
	// The values themselves come from EtcdOptions, which resolves user, tuned and default in one place.
	for i := range c.Status.Tuning.Values {
		tv := &c.Status.Tuning.Values[i]
		if t, ok := tuned[tv.Name]; ok {
			*tv = t
		}
		if resources.UserSet(c, tv.Name) {
			tv.Source, tv.Evidence = etcdv1alpha1.TuningSourceUser, ""
		}
	}
	o := resources.EtcdOptions(c)
	for i := range c.Status.Tuning.Values {
		tv := &c.Status.Tuning.Values[i]
		switch tv.Name {
		case etcdv1alpha1.TunableHeartbeatInterval:
			tv.Value = fmt.Sprint(o.HeartbeatIntervalMillis)
		case etcdv1alpha1.TunableElectionTimeout:
			tv.Value = fmt.Sprint(o.ElectionTimeoutMillis)
		case etcdv1alpha1.TunableSnapshotCount:
			tv.Value = fmt.Sprint(o.SnapshotCount)
		case etcdv1alpha1.TunableAutoCompactionRetention:
			tv.Value = o.AutoCompactionRetention
		}
	}
}
