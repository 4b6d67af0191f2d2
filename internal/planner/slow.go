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

// Streaks of windows: a member is reported slow after SlowWindowsToReport slow windows in a row, since
// one window's p99 rests on the few slowest of some hundred writes and one stall of a shared disk
// should not be reported. It stays reported until SlowWindowsToClear windows in a row are not slow,
// since a slow disk's p99 over one window rests on its few slowest fsyncs and may dip under the
// threshold now and then.
const (
	SlowWindowsToReport = 2
	SlowWindowsToClear  = 2
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

// SlowRecord is what is kept of the members' disks from one judged window to the next, by member ID.
type SlowRecord struct {
	// Streaks counts the windows in a row a member was slow (positive), or, once it is reported, the
	// windows in a row it was not (negative). A reported member always has one.
	Streaks map[uint64]int
	// Slow holds the members reported slow, with the figures.
	Slow map[uint64]string
}

// FoldSlowWindows folds the verdicts on the windows just measured, age long, into the record: windows
// holds, per member judged, the figures that make it slow (SlowMembers), "" when none do. A member
// not judged this time (it did not answer, could not be read now or at the baseline, or is reported
// failing) keeps its streak and report: a failed read is no evidence that its disk recovered. It is
// forgotten only when it left the member list (names, by ID, has no name for it) or restarted, since
// a new process is new evidence.
func FoldSlowWindows(r SlowRecord, windows map[uint64]string, names map[uint64]string, restarted map[uint64]bool, age time.Duration) SlowRecord {
	out := SlowRecord{Streaks: map[uint64]int{}, Slow: map[uint64]string{}}
	for id, why := range windows {
		before, reported := r.Streaks[id], r.Slow[id] != ""
		if why != "" {
			out.Streaks[id] = max(before, 0) + 1
			if out.Streaks[id] >= SlowWindowsToReport || reported {
				out.Slow[id] = fmt.Sprintf("%s over the last %s (%d windows in a row)", why, age.Round(time.Second), out.Streaks[id])
			}
		} else if reported && before > -(SlowWindowsToClear-1) {
			out.Streaks[id] = min(before, 0) - 1 // counts fast windows of a reported member, which stays reported
			out.Slow[id] = r.Slow[id]
		}
	}
	for id, streak := range r.Streaks {
		if _, judged := windows[id]; judged || names[id] == "" || restarted[id] {
			continue
		}
		out.Streaks[id] = streak
		if why := r.Slow[id]; why != "" {
			out.Slow[id] = why
		}
	}
	return out
}
