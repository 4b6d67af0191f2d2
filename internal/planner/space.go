package planner

import (
	"fmt"
	"sort"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Space is what the planner knows of the members' databases and what to do about them.
type Space struct {
	// Quota is the database quota the members run with, in bytes.
	Quota int64
	// NoSpace: etcd raised the NOSPACE alarm and refuses writes.
	NoSpace bool
	// Revision is the cluster's current key-value revision; Compacted, the revision the operator
	// compacted at to clear this NOSPACE alarm (0: not yet).
	Revision, Compacted int64
	// Defragmented lists the members defragmented since that compaction. A member's in-use size
	// is recounted only when its database commits, which NOSPACE stops: until then only a
	// defragmentation tells how much of the file is data.
	Defragmented map[string]bool
	// AutoDefrag is the policy; MinFree and MinFreePercent its thresholds.
	AutoDefrag     bool
	MinFree        int64
	MinFreePercent int64
}

// The database is near its quota past this share of it (percent); NOSPACE is disarmed only below
// disarmBelow, so that etcd does not raise it again with the next write.
const (
	nearQuota   = 80
	disarmBelow = 90
	// nearQuotaFreePercent: near the quota, a tenth of the file free is worth defragmenting.
	nearQuotaFreePercent = 10
)

// decideSpace keeps the databases within their quota: under NOSPACE it compacts the history,
// defragments every member, restarts those running another quota than the recorded one, and
// disarms the alarm, or says why it cannot; otherwise it defragments
// members as the policy says. Called only while every member is healthy.
func decideSpace(in Input, e *Etcd) (Action, bool) {
	s := in.Space
	if s.Quota <= 0 {
		return Action{}, false
	}
	if s.NoSpace {
		compact := Action{Kind: Compact, Revision: s.Revision, Reason: reason.NoSpace,
			Message: fmt.Sprintf("the database reached its quota (%s) and etcd refuses writes: compacting the key history up to revision %d", mib(s.Quota), s.Revision)}
		// One compaction per round, not one whenever the revision moved: under NOSPACE etcd still
		// applies deletes and lease revocations, so the revision moves while members are defragmented,
		// and compacting again (which starts the defragmentations over) would never end the round.
		// A compaction remembered past the current revision was of an earlier incarnation (a rebuild
		// from an older backup, or a survivor behind the lost leader).
		if s.Compacted == 0 || s.Compacted > s.Revision {
			return compact, true
		}
		if a, ok := nextDefrag(e, func(m EtcdMember) bool { return !s.Defragmented[m.Name] }, reason.NoSpace, "to clear NOSPACE"); ok {
			return a, true
		}
		// Members still running another quota than the recorded one (raised after the volumes grew,
		// or in spec.etcd) restart with it first: disarmed, the old quota would raise the alarm again
		// with the next write, and the roll (decideReconfigure) never comes while it is raised.
		staleQuota := func(m EtcdMember) bool { return in.Pods[m.Name].StaleQuota }
		for _, m := range e.Members {
			if staleQuota(m) {
				return rollNext(in, e, staleQuota, podVersion(in), reason.NoSpace,
					fmt.Sprintf("etcd refuses writes (NOSPACE) and the members run another quota than %s", mib(s.Quota))), true
			}
		}
		var largest EtcdMember
		for _, m := range e.Members {
			if m.DBSize > largest.DBSize {
				largest = m
			}
		}
		if largest.DBSize*100 < disarmBelow*s.Quota {
			return Action{Kind: DisarmNoSpace, Reason: reason.NoSpace,
				Message: fmt.Sprintf("the databases are back under the quota (largest %s of %s): disarming NOSPACE so that etcd accepts writes again", mib(largest.DBSize), mib(s.Quota))}, true
		}
		if s.Revision > s.Compacted {
			// The round is over and did not free enough, but keys were deleted since its compaction
			// (what the NoSpaceLeft message asks of the user): a new round may free their history.
			compact.Message += " (keys were deleted since the last compaction)"
			return compact, true
		}
		return Action{Kind: Wait, Reason: reason.NoSpaceLeft, Message: fmt.Sprintf("etcd refuses writes (NOSPACE): %s holds %s of live data after compaction and defragmentation, "+
			"against a quota of %s; raise spec.etcd.quotaBackendBytes (and spec.storage.size to at least 1.25 times it) or delete keys", displayName(largest), mib(largest.DBSizeInUse), mib(s.Quota))}, true
	}
	near := func(m EtcdMember) bool {
		return m.DBSize*100 >= nearQuota*s.Quota && free(m)*100 >= nearQuotaFreePercent*m.DBSize
	}
	if a, ok := nextDefrag(e, near, reason.NearQuota, fmt.Sprintf("the database nears its quota of %s", mib(s.Quota))); ok {
		return a, true
	}
	if !s.AutoDefrag {
		return Action{}, false
	}
	fragmented := func(m EtcdMember) bool {
		return free(m) >= s.MinFree && free(m)*100 >= s.MinFreePercent*m.DBSize
	}
	return nextDefrag(e, fragmented, reason.Defragmenting, fmt.Sprintf("at least %s and %d%% of the file is free", mib(s.MinFree), s.MinFreePercent))
}

// nextDefrag picks the next member to defragment among those that want it: followers and learners
// first (by name), the leader last, after leadership has moved to another voter.
func nextDefrag(e *Etcd, want func(EtcdMember) bool, because reason.Reason, why string) (Action, bool) {
	var cands []EtcdMember
	for _, m := range e.Members {
		if want(m) {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return Action{}, false
	}
	sort.Slice(cands, func(i, j int) bool {
		if li, lj := cands[i].ID == e.LeaderID, cands[j].ID == e.LeaderID; li != lj {
			return !li
		}
		return cands[i].Name < cands[j].Name
	})
	m := cands[0]
	msg := fmt.Sprintf("defragmenting %s (%s free of %s) %s", displayName(m), mib(free(m)), mib(m.DBSize), why)
	if voters, _ := countRoles(e.Members); m.ID == e.LeaderID && voters > 1 {
		to := pickTransferee(e.Members, m.ID)
		return Action{Kind: MoveLeader, Members: []string{m.Name, to.Name}, ID: to.ID, Reason: because, Message: msg + "; moving leadership to " + to.Name + " first"}, true
	}
	return Action{Kind: Defragment, Members: []string{m.Name}, ID: m.ID, Reason: because, Message: msg}, true
}

func free(m EtcdMember) int64 { return m.DBSize - m.DBSizeInUse }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
