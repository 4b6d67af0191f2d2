package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// UpgradeDeadline is how long an upgraded member may take to become healthy before it is rolled back.
const UpgradeDeadline = 3 * time.Minute

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
	if err != nil || step == in.Blocked {
		return cur
	}
	return step
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
		return Action{Kind: Wait, Reason: "VersionChangeRefused", Message: err.Error()}, true
	}
	if step == in.Blocked {
		return Action{Kind: Wait, Reason: "UpgradeFailed", Message: fmt.Sprintf("the upgrade to %s failed and was rolled back; change spec.version to try again", step)}, true
	}
	path, _ := versions.Path(cur, in.TargetVersion)
	var pending []EtcdMember
	var leader *EtcdMember
	for i, m := range e.Members {
		if runningVersion(in, m) == step {
			continue
		}
		if m.ID == e.LeaderID {
			leader = &e.Members[i]
			continue
		}
		pending = append(pending, m)
	}
	atStep := len(e.Members) - len(pending)
	if leader != nil {
		atStep--
	}
	progress := fmt.Sprintf("%d/%d members at %s, stepping %s", atStep, len(e.Members), step, strings.Join(path, " → "))
	if len(pending) == 0 && leader == nil {
		// Every pod runs the step; the reported versions follow once the members answer again.
		return Action{Kind: Wait, Reason: "Upgrading", Message: progress}, true
	}
	if lag := catchUpLag(e); lag > maxCatchUpLag {
		return Action{Kind: Wait, Reason: "Upgrading", Message: fmt.Sprintf("%s; waiting for members to catch up (lag %d entries)", progress, lag)}, true
	}
	if len(pending) > 0 {
		m := pending[0]
		return Action{Kind: RollMember, Members: []string{m.Name}, Version: step, Reason: "Upgrading", Message: fmt.Sprintf("%s; restarting %s at %s", progress, m.Name, step)}, true
	}
	to := pickTransferee(upgraded(in, e, step), leader.ID)
	if to.ID == 0 {
		return Action{Kind: Wait, Reason: "Upgrading", Message: progress + "; no upgraded member can take leadership"}, true
	}
	return Action{Kind: MoveLeader, Members: []string{leader.Name, to.Name}, ID: to.ID, Reason: "Upgrading", Message: fmt.Sprintf("%s; moving leadership from %s to %s before restarting it", progress, leader.Name, to.Name)}, true
}

// failedUpgrade finds a member whose pod runs a newer version than the cluster's and that has been
// unhealthy past UpgradeDeadline, and rolls it back to the cluster version.
func failedUpgrade(in Input, e *Etcd) (Action, bool) {
	cur := ClusterVersion(in)
	cv, err := versions.Parse(cur)
	if err != nil {
		return Action{}, false
	}
	for _, k := range in.Known {
		m, ok := findByName(e.Members, k.Name)
		pv, perr := versions.Parse(in.Pods[k.Name].Version)
		if !ok || m.Healthy || perr != nil || pv.Compare(cv) <= 0 || k.UnhealthySince == nil || in.Now.Sub(*k.UnhealthySince) < UpgradeDeadline {
			continue
		}
		return Action{Kind: RollMember, Members: []string{k.Name}, Version: cur, Reason: "UpgradeFailed",
			Message: fmt.Sprintf("%s did not become healthy at %s within %s; rolling it back to %s and stopping the upgrade", k.Name, pv, UpgradeDeadline, cur)}, true
	}
	return Action{}, false
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
