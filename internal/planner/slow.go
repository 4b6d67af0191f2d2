package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// A member is slow when, over one window, the p99 of its WAL fsyncs or of its backend commits is
// above both SlowFloor and SlowRatio times the median of the same figure on its peers, with at least
// SlowMinSamples observations behind each figure. The floor keeps fast disks' noise (1 ms against
// 0.1 ms) from counting; the ratio keeps a cluster that is slow as a whole (a busy shared disk) from
// blaming one member: replacing a member cannot help there.
const (
	SlowFloor      = 100 * time.Millisecond
	SlowRatio      = 10
	SlowMinSamples = 50
)

// DiskWindow is what one member's disk-latency histograms say about the last window.
type DiskWindow struct {
	Member string
	// WALFsyncP99 and BackendCommitP99 are p99s over the window; WALFsyncs and Commits, how many
	// observations they rest on.
	WALFsyncP99, BackendCommitP99 time.Duration
	WALFsyncs, Commits            uint64
}

// SlowMembers judges one window: member → the measured figures that make it slow. Members absent
// from windows (the operator could not read them, or they restarted) are never slow: no evidence.
func SlowMembers(windows []DiskWindow) map[string]string {
	out := map[string]string{}
	figures := []struct {
		what  string
		value func(DiskWindow) (time.Duration, bool)
	}{
		{"WAL fsync", func(w DiskWindow) (time.Duration, bool) { return w.WALFsyncP99, w.WALFsyncs >= SlowMinSamples }},
		{"backend commit", func(w DiskWindow) (time.Duration, bool) { return w.BackendCommitP99, w.Commits >= SlowMinSamples }},
	}
	for _, w := range windows {
		for _, f := range figures {
			mine, ok := f.value(w)
			if !ok || mine <= SlowFloor {
				continue
			}
			var peers []time.Duration
			for _, o := range windows {
				if v, ok := f.value(o); ok && o.Member != w.Member {
					peers = append(peers, v)
				}
			}
			if len(peers) == 0 {
				continue // slow compared with nobody: a one-member cluster, or peers without load
			}
			median := medianOf(peers)
			if float64(mine) <= SlowRatio*float64(median) {
				continue
			}
			msg := fmt.Sprintf("%s p99 %s against a median of %s on its peers", f.what, round(mine), round(median))
			if out[w.Member] != "" {
				msg = out[w.Member] + ", " + msg
			}
			out[w.Member] = msg
		}
	}
	return out
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}

// SlowPolicy is spec.maintenance.slowMemberReplacement.
type SlowPolicy struct {
	// Replace: a member slow without interruption for After is replaced; otherwise it is only reported.
	Replace bool
	After   time.Duration
}

// decideSlow replaces a member that has been slow (EtcdMember.Slow) for the policy's After, the way a
// failed member is replaced: removed through safeRemoval (never below quorum, the leader moved away
// first), then a new learner added and promoted by the scaling rules. The caller gets here only when
// every member is healthy, no learner is catching up and the cluster has its full size, so a second
// slow member waits until the first one's replacement is promoted and healthy. Under either policy a
// leader reported slow hands leadership to a member that is not (slowLeader).
func decideSlow(in Input, e *Etcd) (Action, bool) {
	if in.Slow.Replace {
		for _, k := range in.Known {
			m, ok := findByName(e.Members, k.Name)
			if !ok || m.Slow == "" || k.SlowSince == nil || in.Now.Sub(*k.SlowSince) < in.Slow.After {
				continue
			}
			msg := fmt.Sprintf("%s has been slow since %s (%s); replacing it", k.Name, k.SlowSince.UTC().Format(time.RFC3339), m.Slow)
			if a, ok := safeRemoval(in, m, reason.MemberSlow, msg); ok {
				return a, true
			}
		}
	}
	return slowLeader(in, e)
}

// slowLeader moves leadership off a leader reported slow to the healthy voter that is not slow with
// the most of the log: every write waits for the leader's own disk (its WAL fsync is in every raft
// round), while a slow follower among three or more is outvoted by the others. A leader transfer is
// cheap, changes no membership and needs no policy; with no fast voter to take over it stays put.
func slowLeader(in Input, e *Etcd) (Action, bool) {
	for _, k := range in.Known {
		m, ok := findByName(e.Members, k.Name)
		if !ok || m.ID != e.LeaderID || m.Slow == "" || k.SlowSince == nil {
			continue
		}
		var to EtcdMember
		for _, o := range e.Members {
			if o.ID != m.ID && !o.Learner && o.Healthy && o.Slow == "" && (to.ID == 0 || o.RaftIndex > to.RaftIndex) {
				to = o
			}
		}
		if to.ID == 0 {
			return Action{}, false
		}
		return Action{Kind: MoveLeader, Members: []string{m.Name, to.Name}, ID: to.ID, Reason: reason.MemberSlow,
			Message: fmt.Sprintf("leader %s has been slow since %s (%s); moving leadership to %s, since every write waits for the leader's disk", m.Name, k.SlowSince.UTC().Format(time.RFC3339), m.Slow, to.Name)}, true
	}
	return Action{}, false
}

// SlowStreak is what SlowStreaks decides for one member recorded in status.
type SlowStreak struct {
	Member string
	// Since is the member's new status.members[].slowSince: nil when it is not slow.
	Since *time.Time
	// Began: the member became slow now, and is to be announced.
	Began bool
}

// SlowStreaks decides, per member in known (status.members, in order), since when it has been slow,
// before the decision that may replace it. slow holds this pass's verdicts by member name (the
// measured figures), only for members in etcd's member list; listed says whether that list answered.
// The clock restarts only when a member is judged not slow, restarted, or left: a pass whose member
// list failed sees no member at all, which says nothing of anyone's disk, so it changes nothing; a
// member is forgotten only when a member list that answered leaves it out.
func SlowStreaks(known []KnownMember, slow map[string]string, listed bool, now time.Time) []SlowStreak {
	out := make([]SlowStreak, 0, len(known))
	for _, k := range known {
		s := SlowStreak{Member: k.Name, Since: k.SlowSince}
		switch {
		case !listed:
		case slow[k.Name] == "":
			s.Since = nil
		case k.SlowSince == nil:
			s.Since, s.Began = &now, true
		}
		out = append(out, s)
	}
	return out
}
