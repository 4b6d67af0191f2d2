package etcdcluster

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Slowness is judged over windows between two readings of every member's disk histograms.
const (
	// slowWindow is the shortest window, and the pace of readings while a window is too thin.
	slowWindow = 25 * time.Second
	// fullSlowWindow: a window is judged once every member in it made planner.SlowMinSamples WAL
	// fsyncs, or once it is this long (members with fewer are then left out). A slow follower batches
	// what it receives into few fsyncs, so under a light load its window needs more time.
	fullSlowWindow = 90 * time.Second
	// maxSlowWindow: readings further apart than this (the operator was away, or lost sight of etcd)
	// describe nothing current; they only become the next baseline.
	maxSlowWindow = maxObservationGap
)

// diskReadings is one reading of every member's disk histograms, kept in the cluster's memory as the
// baseline of the next window. Losing it (an operator restart) costs one window without evidence.
type diskReadings struct {
	at      time.Time
	members map[uint64]etcdclient.DiskLatency
}

// observeSlowness, called once etcd answered, reads the disk histograms of every member that answered,
// at most once per slowWindow, and judges the window since the baseline reading (planner.SlowMembers)
// once it holds enough samples (fullSlowWindow); a member slow on planner.SlowWindowsToReport windows
// in a row is slow until planner.SlowWindowsToClear windows in a row are not (planner.FoldSlowWindows).
// Until the next judged window the last verdict stands. A member without a window this time, because
// it did not answer, could not be read now or at the baseline, or is reported failing, keeps its
// verdict and streak: a failed read is no evidence that its disk recovered, and a member frozen by its
// disk most of the time fails reads now and then, which cleared its verdict and so restarted
// slowMemberReplacement.after's clock, over and over (an e2e run saw it reported twice in 2.5 minutes
// and never replaced). A restarted member's histograms start again and its verdict with them: a new
// process is new evidence. read is etcdclient.ReadDiskLatency outside tests.
func (p *pass) observeSlowness(ctx context.Context, o *observation, read func(context.Context, string) (etcdclient.DiskLatency, error)) {
	h := &p.mem.slowness
	o.slow = h.slow
	if !h.due(p.now) {
		return
	}
	h.readAt = p.now
	now := diskReadings{at: p.now, members: readMemberMetrics(ctx, o, "disk latency", func(id uint64) bool { return o.failing[id] == "" }, read)}
	prev, age := h.disk, time.Duration(0)
	if prev != nil {
		age = p.now.Sub(prev.at)
	}
	if prev == nil || age > maxSlowWindow {
		// No window: these readings are the next baseline. The verdicts and streaks stand: a gap (the
		// operator away, or etcd out of its sight, its member list failing) is no evidence that a
		// disk recovered, and dropping them restarted slowMemberReplacement.after's clock.
		h.disk = &now
		return
	}
	windows, restarted := diskWindows(prev, &now, o.names)
	if age < fullSlowWindow && !enoughSamples(windows) {
		return // a thin window: keep the baseline and the last verdict, and read again later
	}
	h.disk = &now
	o.slow = h.judge(windows, planner.SlowMembers(windows), o, restarted, age)
}

// slowHistory is the members' disk history kept across passes: the last reading of their disk
// histograms (disk), the baseline of the next window, taken at disk.at; when they were last read
// (readAt); how many windows in a row each member was slow (streaks: positive while slow, negative
// counting the fast windows of a reported member); and the members slow for long enough to be
// reported, with the figures (slow).
type slowHistory struct {
	disk    *diskReadings
	readAt  time.Time
	streaks map[uint64]int
	slow    map[uint64]string
}

// due says whether the disks are to be read at now: at most once per slowWindow.
func (h *slowHistory) due(now time.Time) bool {
	return h.disk == nil || (now.Sub(h.disk.at) >= slowWindow && now.Sub(h.readAt) >= slowWindow)
}

// judge folds the verdicts on the windows just measured (age long) into the streaks
// (planner.FoldSlowWindows) and returns the members now reported slow.
func (h *slowHistory) judge(windows []planner.DiskWindow, verdicts map[string]string, o *observation, restarted map[uint64]bool, age time.Duration) map[uint64]string {
	judged := map[uint64]string{}
	for _, w := range windows {
		judged[o.ids[w.Member]] = verdicts[w.Member]
	}
	r := planner.FoldSlowWindows(planner.SlowRecord{Streaks: h.streaks, Slow: h.slow}, judged, o.names, restarted, age)
	h.streaks, h.slow = r.Streaks, r.Slow
	return h.slow
}

// diskWindows is what happened between two readings, per member read both times and not restarted;
// restarted are the members read both times whose counts went back.
func diskWindows(prev, now *diskReadings, names map[uint64]string) (windows []planner.DiskWindow, restarted map[uint64]bool) {
	restarted = map[uint64]bool{}
	for id, cur := range now.members {
		before, ok := prev.members[id]
		if !ok {
			continue
		}
		wal, err1 := cur.WALFsync.Since(before.WALFsync)
		commit, err2 := cur.BackendCommit.Since(before.BackendCommit)
		if err1 != nil || err2 != nil {
			restarted[id] = true
			continue
		}
		windows = append(windows, planner.DiskWindow{
			Member:      names[id],
			WALFsyncP99: seconds(wal.Quantile(0.99)), BackendCommitP99: seconds(commit.Quantile(0.99)),
			WALFsyncs: wal.Count, Commits: commit.Count,
		})
	}
	return windows, restarted
}

// enoughSamples says whether every member of the window made enough WAL fsyncs for its p99 to mean
// something.
func enoughSamples(windows []planner.DiskWindow) bool {
	for _, w := range windows {
		if w.WALFsyncs < planner.SlowMinSamples {
			return false
		}
	}
	return true
}

// seconds converts a histogram figure; NaN (an empty window) is 0, which the verdict ignores for want
// of samples anyway.
func seconds(s float64) time.Duration {
	if math.IsNaN(s) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// trackSlowness applies planner.SlowStreaks to status.members[].slowSince, before the decision that
// may replace a member, and announces a member found slow with a Warning event.
func (p *pass) trackSlowness() {
	c, o := p.c, p.obs
	slow := map[string]string{} // the verdicts of the members in etcd's list, by their names
	for name, id := range o.ids {
		if why := o.slow[id]; why != "" {
			slow[name] = why
		}
	}
	for i, s := range planner.SlowStreaks(knownMembers(c), slow, o.etcd != nil, p.now) {
		ms := &c.Status.Members[i]
		switch {
		case s.Since == nil:
			ms.SlowSince = nil
		case s.Began:
			t := metav1.NewTime(*s.Since)
			ms.SlowSince = &t
			p.r.Recorder.Eventf(c, corev1.EventTypeWarning, string(reason.MemberSlow), "%s is slow: %s; %s", ms.Name, slow[ms.Name], slowPolicyText(c, p.now))
		}
	}
}

// slowPolicyText says what the operator will do about a member slow since now.
func slowPolicyText(c *etcdv1alpha1.EtcdCluster, since time.Time) string {
	after, _ := c.Spec.Maintenance.SlowMemberReplacement.AfterDuration()
	if slowPolicy(c).Replace {
		return fmt.Sprintf("it is replaced if it stays slow until %s (spec.maintenance.slowMemberReplacement.after %s)", since.Add(after).UTC().Format(time.RFC3339), after)
	}
	return "spec.maintenance.slowMemberReplacement.policy is Report: look at its node's disk; to replace it, cordon the node and delete its PVC and pod"
}

// slowReplacementDue is how long until the first member reported slow is due for replacement under
// the Replace policy, or 0 when none is (no policy, no slow member, or one already due: a pass that
// did not replace it waits on something else, such as a member's health).
func slowReplacementDue(c *etcdv1alpha1.EtcdCluster, now time.Time) time.Duration {
	policy := slowPolicy(c)
	if !policy.Replace {
		return 0
	}
	var first time.Duration
	for _, m := range c.Status.Members {
		if m.SlowSince == nil {
			continue
		}
		if due := m.SlowSince.Add(policy.After).Sub(now); due > 0 && (first == 0 || due < first) {
			first = due
		}
	}
	return first
}

// slowPolicy is spec.maintenance.slowMemberReplacement for the planner.
func slowPolicy(c *etcdv1alpha1.EtcdCluster) planner.SlowPolicy {
	r := c.Spec.Maintenance.SlowMemberReplacement
	after, _ := r.AfterDuration()                                                                // an unreadable value never gets here (refuseInvalidSpec)
	return planner.SlowPolicy{Replace: r.Policy == etcdv1alpha1.SlowMemberReplace, After: after} // "" (stored before the field existed): Report
}

// slowMessage is the Degraded message for slow members, with the measured figures; "" when none is slow.
func slowMessage(c *etcdv1alpha1.EtcdCluster, o *observation) string {
	var parts []string
	for _, ms := range c.Status.Members {
		if ms.SlowSince == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s slow since %s: %s; %s", ms.Name, ms.SlowSince.UTC().Format(time.RFC3339), o.slow[o.ids[ms.Name]], slowPolicyText(c, ms.SlowSince.Time)))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
