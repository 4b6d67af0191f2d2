package planner

import (
	"fmt"
	"strings"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// maxCatchUpLag is how far (raft entries) a member may trail the leader before the next member is restarted.
const maxCatchUpLag = 1000

// ClusterVersion is the lowest version any member runs: what etcd itself calls the cluster version.
// Members that answer now count; for the others, what they last reported.
func ClusterVersion(in Input) string {
	var low *versions.Version
	consider := func(s string) {
		if v, err := versions.Parse(s); err == nil && (low == nil || v.Compare(*low) < 0) {
			low = &v
		}
	}
	for _, k := range in.Known {
		reported := ""
		if in.Etcd != nil {
			if m, ok := findByName(in.Etcd.Members, k.Name); ok {
				reported = m.Version
			}
		}
		if reported == "" {
			reported = k.Version
		}
		consider(reported)
	}
	if low == nil {
		return ""
	}
	return low.String()
}

// podVersion is the version a (re)created member pod runs: the next step from the cluster version
// toward the target, or the cluster version itself when that step is refused or failed before.
func podVersion(in Input) string {
	cur := ClusterVersion(in)
	if cur == "" {
		return in.TargetVersion
	}
	step, err := versions.NextStep(cur, in.TargetVersion)
	if err != nil || step == in.Blocked || versions.IsMinorDowngrade(cur, step) && !downgradeReady(in.Etcd, step) {
		return cur
	}
	return step
}

// downgradeReady says whether members may start at the older minor step: etcd's downgrade to it is
// enabled and every member that answers has migrated its data (a member being restarted does not
// answer; it migrated before it was stopped, since prepareStep waits for all of them).
func downgradeReady(e *Etcd, step string) bool {
	if e == nil {
		return false
	}
	target := versions.MinorOf(step)
	answered := 0
	for _, m := range e.Members {
		if m.Version == "" {
			continue
		}
		answered++
		if m.DowngradeTarget != target || m.StorageVersion != target {
			return false
		}
	}
	return answered > 0
}

// runningVersion is the version a member's pod runs: its label, else what the member reports.
func runningVersion(in Input, m EtcdMember) string {
	if v := in.Pods[m.Name].Version; v != "" {
		return v
	}
	return m.Version
}

// decideUpgrade rolls one member toward the next step: followers first, the leader last after
// handing leadership to an upgraded member; only when everyone is healthy and caught up.
func decideUpgrade(in Input, e *Etcd) (Action, bool) {
	cur := ClusterVersion(in)
	if cur == "" || cur == in.TargetVersion && allRunning(in, e, cur) {
		return Action{}, false
	}
	step, err := versions.NextStep(cur, in.TargetVersion)
	if err != nil {
		return Action{Kind: Wait, Reason: reason.VersionChangeRefused, Message: err.Error()}, true
	}
	if step == in.Blocked {
		return Action{Kind: Wait, Reason: reason.UpgradeFailed, Message: fmt.Sprintf("the upgrade to %s failed and was rolled back; change spec.version to try again", step)}, true
	}
	path, _ := versions.Path(cur, in.TargetVersion)
	if a, ok := prepareStep(in, e, cur, step, path); ok {
		return a, true
	}
	atStep := len(upgraded(in, e, step))
	progress := fmt.Sprintf("%d/%d members at %s, stepping %s", atStep, len(e.Members), step, strings.Join(path, " → "))
	if atStep == len(e.Members) {
		// Every pod runs the step; the reported versions follow once the members answer again.
		return Action{Kind: Wait, Reason: reason.Upgrading, Message: progress}, true
	}
	return rollNext(in, e, func(m EtcdMember) bool { return runningVersion(in, m) != step }, step, reason.Upgrading, progress), true
}

// rollNext restarts the next member that needs it: followers first, the leader last once it handed
// leadership to a member that no longer needs a restart; only when every member is caught up and
// every member already restarted is Ready again. etcd calls a restarted member healthy a few seconds
// before its pod's readiness probe passes; restarting the next one in between would leave the client
// Service with two members fewer for that moment.
func rollNext(in Input, e *Etcd, needsRestart func(EtcdMember) bool, version string, because reason.Reason, progress string) Action {
	pods := in.Pods
	var pending []EtcdMember
	var leader *EtcdMember
	for i, m := range e.Members {
		if !needsRestart(m) {
			continue
		}
		if m.ID == e.LeaderID {
			leader = &e.Members[i]
			continue
		}
		pending = append(pending, m)
	}
	if lag := catchUpLag(e); lag > maxCatchUpLag {
		return Action{Kind: Wait, Reason: because, Message: fmt.Sprintf("%s; waiting for members to catch up (lag %d entries)", progress, lag)}
	}
	for _, m := range e.Members {
		if !needsRestart(m) && pods[m.Name].NotReady {
			return Action{Kind: Wait, Reason: because, Message: fmt.Sprintf("%s; waiting for %s's pod to be Ready", progress, m.Name)}
		}
	}
	if len(pending) > 0 {
		// A member whose pod is already out of the client Service goes first: restarting another
		// would leave the Service two members short.
		m := pending[0]
		for _, p := range pending {
			if pods[p.Name].NotReady {
				m = p
				break
			}
		}
		return Action{Kind: RollMember, Members: []string{m.Name}, Version: version, Reason: because, Message: fmt.Sprintf("%s; restarting %s at %s", progress, m.Name, version)}
	}
	if voters, _ := countRoles(e.Members); voters == 1 {
		// A one-member cluster has nobody to hand leadership to: its member restarts, and the
		// cluster is unavailable until it is back, on its volume.
		if in.EphemeralData {
			return Action{Kind: Wait, Reason: because, Message: fmt.Sprintf("%s; %s keeps its data in memory (storage.medium Memory), which a restart of the only member would lose: "+
				"scale to 3 members (spec.replicas) so that members restart one at a time", progress, leader.Name)}
		}
		return Action{Kind: RollMember, Members: []string{leader.Name}, Version: version, Reason: because, Message: fmt.Sprintf("%s; restarting %s, the only member, at %s", progress, leader.Name, version)}
	}
	var done []EtcdMember
	for _, m := range e.Members {
		if !needsRestart(m) {
			done = append(done, m)
		}
	}
	to := pickTransferee(done, leader.ID)
	if to.ID == 0 {
		return Action{Kind: Wait, Reason: because, Message: progress + "; no restarted member can take leadership"}
	}
	return Action{Kind: MoveLeader, Members: []string{leader.Name, to.Name}, ID: to.ID, Reason: because, Message: fmt.Sprintf("%s; moving leadership from %s to %s before restarting it", progress, leader.Name, to.Name)}
}

// decideReconfigure brings member pods to the configuration the spec asks for (ConfigHash). Pods an
// earlier operator made carry no hash: they are adopted as they are, by recording the current hash,
// so that upgrading the operator restarts nothing; a changed spec is then rolled one member at a time.
func decideReconfigure(in Input, e *Etcd) (Action, bool) {
	if in.ConfigHash == "" {
		return Action{}, false
	}
	for _, m := range e.Members {
		if p := in.Pods[m.Name]; p.Exists && !p.Deleting && p.ConfigHash == "" {
			return Action{Kind: AdoptPod, Members: []string{m.Name}, Reason: reason.AdoptingPod,
				Message: fmt.Sprintf("the pod of %s was made by an earlier operator version; adopting it without a restart", m.Name)}, true
		}
	}
	stale := func(m EtcdMember) bool { p := in.Pods[m.Name]; return p.ConfigHash != in.ConfigHash || p.StaleQuota }
	n := 0
	for _, m := range e.Members {
		if stale(m) {
			n++
		}
	}
	if n == 0 {
		return Action{}, false
	}
	progress := fmt.Sprintf("%d/%d members run the current pod configuration", len(e.Members)-n, len(e.Members))
	because := reason.Reconfiguring
	for _, m := range e.Members {
		if p := in.Pods[m.Name]; in.Tuned != "" && stale(m) && p.Tuned != in.Tuned {
			because, progress = reason.Tuning, fmt.Sprintf("%d/%d members run the tuned options %s", len(e.Members)-n, len(e.Members), in.Tuned)
			break
		}
	}
	return rollNext(in, e, stale, podVersion(in), because, progress), true
}

// prepareStep holds the first restart of a step until etcd can take it:
//   - a minor downgrade needs etcd's downgrade API enabled, then every member's storage migrated
//     to the older schema (etcd snapshots right after the cluster version drops);
//   - a step to 3.7 needs every member to have snapshotted past the entries etcd 3.5 wrote, which
//     3.7 can no longer decode when it replays the log (it panics: "unmarshal should never fail").
func prepareStep(in Input, e *Etcd, cur, step string, path []string) (Action, bool) {
	progress := fmt.Sprintf("stepping %s", strings.Join(path, " → "))
	if versions.IsMinorDowngrade(cur, step) {
		target := versions.MinorOf(step)
		for _, m := range e.Members {
			if m.DowngradeTarget != target {
				return Action{Kind: EnableDowngrade, Version: target, Reason: reason.Upgrading, Message: fmt.Sprintf("%s; enabling etcd's downgrade to %s", progress, target)}, true
			}
		}
		var waiting []string
		for _, m := range e.Members {
			if m.StorageVersion != target {
				waiting = append(waiting, fmt.Sprintf("%s at %s", m.Name, m.StorageVersion))
			}
		}
		if len(waiting) > 0 {
			return Action{Kind: Wait, Reason: reason.Upgrading, Message: fmt.Sprintf("%s; waiting for members to migrate their data to %s (%s)", progress, target, strings.Join(waiting, ", "))}, true
		}
		return Action{}, false
	}
	s, _ := versions.Parse(step)
	if s.Minor < 7 || in.LegacyWALIndex == 0 {
		return Action{}, false
	}
	// A member snapshots once it applied more than its own --snapshot-count entries since its last
	// snapshot: while a lowered count (a spec change, auto-tuning) is being rolled out, members not
	// restarted yet still run the higher one.
	count := in.SnapshotCount
	for _, m := range e.Members {
		count = max(count, in.Pods[m.Name].SnapshotCount)
	}
	need := in.LegacyWALIndex + count + 1
	var low uint64
	for i, m := range e.Members {
		if i == 0 || m.AppliedIndex < low {
			low = m.AppliedIndex
		}
	}
	if low >= need {
		return Action{}, false
	}
	return Action{Kind: AdvanceLog, Count: need - low, Reason: reason.Upgrading,
		Message: fmt.Sprintf("%s; the log may hold etcd 3.5 entries up to index %d, which etcd 3.7 cannot replay: appending %d entries so that every member snapshots past them", progress, in.LegacyWALIndex, need-low)}, true
}

// LegacyWALIndex is the new value of status.legacyWALIndex after observing the cluster version go
// from prev to now: when the last 3.5 member is gone, no 3.5 entry can be appended after the
// leader's current index, but the entries before it stay in the log until each member snapshots.
// raftIndexes are the indexes the members report now.
func LegacyWALIndex(old uint64, prev, now string, raftIndexes []uint64) uint64 {
	p, err1 := versions.Parse(prev)
	n, err2 := versions.Parse(now)
	if err1 != nil || err2 != nil || p.Minor > 5 || n.Minor < 6 {
		return old
	}
	index := old
	for _, i := range raftIndexes {
		index = max(index, i)
	}
	return index
}

// failedUpgrade finds a member whose pod runs a newer version than the cluster's and that etcd has
// reported failing past the upgrade timeout, and rolls it back to the cluster version.
func failedUpgrade(in Input, e *Etcd) (Action, bool) {
	cur := ClusterVersion(in)
	cv, err := versions.Parse(cur)
	if err != nil {
		return Action{}, false
	}
	for _, k := range in.Known {
		m, ok := findByName(e.Members, k.Name)
		pv, perr := versions.Parse(in.Pods[k.Name].Version)
		if !ok || m.Failing == "" || perr != nil || pv.Compare(cv) <= 0 || k.FailingSince == nil || in.Now.Sub(*k.FailingSince) < in.UpgradeTimeout {
			continue
		}
		return Action{Kind: RollMember, Members: []string{k.Name}, Version: cur, Reason: reason.UpgradeFailed,
			Message: fmt.Sprintf("%s did not become healthy at %s within %s; rolling it back to %s and stopping the upgrade", k.Name, pv, in.UpgradeTimeout, cur)}, true
	}
	return Action{}, false
}

// cancelDowngrade turns off a downgrade that spec.version no longer asks for (it went back up while
// members were migrating or being restarted): left enabled, etcd would keep the cluster version
// and storage at the older minor. A downgrade the operator recorded counts even when no member
// reports it (etcd 3.5 members do not report downgrades).
func cancelDowngrade(in Input, e *Etcd) (Action, bool) {
	enabled := in.DowngradeRecorded
	for _, m := range e.Members {
		if m.DowngradeTarget != "" {
			enabled = m.DowngradeTarget
		}
	}
	if enabled == "" || versions.MinorOf(in.TargetVersion) == enabled {
		return Action{}, false
	}
	return Action{Kind: CancelDowngrade, Version: enabled, Reason: reason.Upgrading,
		Message: fmt.Sprintf("spec.version is %s now: cancelling etcd's downgrade to %s", in.TargetVersion, enabled)}, true
}

func allRunning(in Input, e *Etcd, v string) bool {
	for _, m := range e.Members {
		if runningVersion(in, m) != v {
			return false
		}
	}
	return true
}

func upgraded(in Input, e *Etcd, v string) []EtcdMember {
	var out []EtcdMember
	for _, m := range e.Members {
		if runningVersion(in, m) == v {
			out = append(out, m)
		}
	}
	return out
}

func catchUpLag(e *Etcd) uint64 {
	var leaderIdx uint64
	for _, m := range e.Members {
		if m.ID == e.LeaderID {
			leaderIdx = m.RaftIndex
		}
	}
	var lag uint64
	for _, m := range e.Members {
		if leaderIdx > m.RaftIndex && leaderIdx-m.RaftIndex > lag {
			lag = leaderIdx - m.RaftIndex
		}
	}
	return lag
}
