package planner

import (
	"fmt"
	"strings"
	"time"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Health is what a pass saw of the cluster that its conditions and phase follow from (with the
// action decided): counts of the voting members, what is wrong, and what status records.
type Health struct {
	// EtcdAnswered: a member answered a linearizable member list; EtcdError says why none did.
	EtcdAnswered bool
	EtcdError    string
	// Migrating: the cluster is being taken over (spec.bootstrap.migrateFrom); EtcdMembers counts
	// every member of etcd's list, the old ones too.
	Migrating   bool
	EtcdMembers int
	// Voters are this cluster's voting members in etcd; HealthyVoters those healthy; ServingVoters
	// those healthy whose pod is Ready (what a client of the client Service can reach).
	Voters, HealthyVoters, ServingVoters int32
	// Replicas is spec.replicas.
	Replicas      int32
	Bootstrapped  bool
	ClientService string
	Paused        bool
	Recovering    bool
	// Blocked is the upgrade stopped after a member failed at the new version (status.upgradeBlocked).
	Blocked                       *etcdv1alpha1.UpgradeBlock
	CurrentVersion, TargetVersion string
	// QuorumLost is the QuorumLost condition while it is True.
	QuorumLost *Problem
	// ClusterID and WrongAnswers: answers refused because another cluster, or another member, gave them.
	ClusterID    string
	WrongAnswers []string
	// Trust is why no certificate can be issued now.
	Trust *Problem
	// Alarms says which alarms are raised where ("" when none).
	Alarms string
	// Divergence is what the consistency check found against members.
	Divergence *Problem
	// VolumeRefusal says why the volumes cannot grow to spec.storage.size.
	VolumeRefusal string
	// Slow names the members found slow ("" when none).
	Slow string
	// VolumesGrowing are the members whose volume the storage driver is growing to StorageSize.
	VolumesGrowing []string
	StorageSize    string
	// CARotation is the CA rotation under way.
	CARotation *CARotation
	// PrevDegraded and PrevProgressing are the reasons of those conditions before this pass ("" when
	// absent): a Warning event is recorded when a reason a human must act on first shows.
	PrevDegraded, PrevProgressing reason.Reason
	// WasAvailable: Available was True before this pass. OutOfReachFor is how long the passes have
	// found the quorum out of reach, counted from the first that did (0 for that one).
	WasAvailable  bool
	OutOfReachFor time.Duration
}

// AvailabilityGrace is how long Available stays True after the passes first find the quorum out of
// reach: a leader election (a leader's pod stopping hands leadership over, a lost leader waits out
// the election timeout) leaves the members without a leader for a second or so, in which every
// linearizable call fails and clients retry; Available flapping with each would say nothing a user can
// act on. A quorum out of reach for longer is reported on the first pass after the grace.
const AvailabilityGrace = 5 * time.Second

// Problem is a reason and what it says, for a condition.
type Problem struct {
	Why     reason.Reason
	Message string
}

// Condition is one condition of an EtcdCluster.
type Condition struct {
	Type    string
	Status  bool
	Reason  reason.Reason
	Message string
}

// Warning is a Warning event to record.
type Warning struct {
	Reason  reason.Reason
	Message string
}

// ClusterStatus is what the conditions and the phase of an EtcdCluster are after a pass.
type ClusterStatus struct {
	// Degraded is nil when the last verdict stands (paused).
	Degraded    *Condition
	Progressing Condition
	// Upgrading is nil when it stays as it is, unless RemoveUpgrading (no version known yet).
	Upgrading       *Condition
	RemoveUpgrading bool
	Phase           etcdv1alpha1.ClusterPhase
	// Warnings are recorded as the conditions are set.
	Warnings []Warning
}

func clusterCondition(typ string, status bool, why reason.Reason, message string) Condition {
	return Condition{Type: typ, Status: status, Reason: why, Message: message}
}

func clusterWarning(why reason.Reason, message string) Warning {
	return Warning{Reason: why, Message: message}
}

// Quorum says whether a majority of the voting members is healthy.
func (h Health) Quorum() bool {
	return h.EtcdAnswered && h.Voters > 0 && h.HealthyVoters >= h.Voters/2+1
}

// degraded: short of the members the spec asks, or of quorum.
func (h Health) degraded() bool {
	return h.Bootstrapped && (!h.Quorum() || h.HealthyVoters < h.Replicas)
}

// Availability is the Available condition: whether a client of the client Service gets an answer.
func Availability(h Health) Condition {
	c := availabilityNow(h)
	if !c.Status && h.Bootstrapped && h.WasAvailable && h.OutOfReachFor < AvailabilityGrace && (c.Reason == reason.EtcdUnreachable || c.Reason == reason.QuorumLost) {
		return clusterCondition(etcdv1alpha1.ConditionAvailable, true, reason.QuorumHealthy, fmt.Sprintf(
			"the quorum was in reach until a moment ago (held for up to %s, a leader election's length: %s)", AvailabilityGrace, c.Message))
	}
	return c
}

// availabilityNow is Available as this pass alone sees it.
func availabilityNow(h Health) Condition {
	switch {
	case h.Migrating && h.EtcdAnswered:
		return clusterCondition(etcdv1alpha1.ConditionAvailable, true, reason.QuorumHealthy, fmt.Sprintf("the cluster being taken over has quorum (%d members, %d of them this EtcdCluster's voting members)", h.EtcdMembers, h.Voters))
	case h.Quorum() && h.ServingVoters == 0:
		// Available promises that a client of the client Service gets an answer; until a member's pod
		// is Ready the Service has no endpoint.
		return clusterCondition(etcdv1alpha1.ConditionAvailable, false, reason.NoReadyEndpoint, fmt.Sprintf("%d of %d voting members healthy, but no member pod is Ready yet: the client Service %s has no endpoint", h.HealthyVoters, h.Voters, h.ClientService))
	case h.Quorum():
		return clusterCondition(etcdv1alpha1.ConditionAvailable, true, reason.QuorumHealthy, fmt.Sprintf("%d of %d voting members healthy, %d of them Ready behind the client Service", h.HealthyVoters, h.Voters, h.ServingVoters))
	case !h.Bootstrapped:
		return clusterCondition(etcdv1alpha1.ConditionAvailable, false, reason.Bootstrapping, "the initial members have not formed a cluster yet")
	case !h.EtcdAnswered:
		return clusterCondition(etcdv1alpha1.ConditionAvailable, false, reason.EtcdUnreachable, "no member answers: "+h.EtcdError)
	default:
		return clusterCondition(etcdv1alpha1.ConditionAvailable, false, reason.QuorumLost, fmt.Sprintf("only %d of %d voting members healthy", h.HealthyVoters, h.Voters))
	}
}

// Conditions are the Degraded, Progressing and Upgrading conditions and the phase that follow from
// what a pass saw and the action it decided, with the Warning events of reasons a human must act on.
func Conditions(h Health, a Action) ClusterStatus {
	s := ClusterStatus{Phase: Phase(h, a)}
	var warn *Warning
	s.Degraded, warn = degradedCondition(h, a)
	if warn != nil {
		s.Warnings = append(s.Warnings, *warn)
	}
	if a.Kind == Wait && a.Reason == reason.NoSpaceLeft && h.PrevProgressing != reason.NoSpaceLeft {
		s.Warnings = append(s.Warnings, clusterWarning(reason.NoSpaceLeft, a.Message)) // the operator cannot fix this one
	}
	s.Progressing = progressingCondition(h, a)
	s.Upgrading, s.RemoveUpgrading = upgradingCondition(h, a)
	return s
}

// degradedCondition ranks what is wrong: the first that holds is the verdict. nil: the last
// verdict stands. A reason a human must act on comes with a Warning event when it first shows.
func degradedCondition(h Health, a Action) (*Condition, *Warning) {
	var d Condition
	var w *Warning
	switch degraded := h.degraded(); {
	case a.Kind == Wait && a.Reason == reason.Paused:
		// Paused says nothing about health; keep the last Degraded verdict.
		return nil, nil
	case h.QuorumLost != nil:
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, h.QuorumLost.Why, h.QuorumLost.Message)
	case len(h.WrongAnswers) > 0:
		msg := fmt.Sprintf("refused answers not from this cluster (%s): %s; nothing is done on their word", h.ClusterID, strings.Join(h.WrongAnswers, "; "))
		w = warnOnce(h, clusterWarning(reason.WrongCluster, msg))
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, reason.WrongCluster, msg)
	case h.Trust != nil:
		w = warnOnce(h, clusterWarning(h.Trust.Why, h.Trust.Message))
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, h.Trust.Why, h.Trust.Message)
	case h.Alarms != "":
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, reason.AlarmRaised, h.Alarms)
	case h.Divergence != nil:
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, h.Divergence.Why, h.Divergence.Message)
	case h.VolumeRefusal != "" && !degraded:
		w = warnOnce(h, clusterWarning(reason.VolumeExpansionUnsupported, h.VolumeRefusal))
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, reason.VolumeExpansionUnsupported, h.VolumeRefusal)
	case h.Blocked != nil && !degraded:
		b := h.Blocked
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, reason.UpgradeFailed, fmt.Sprintf("%s did not become healthy at %s; it was rolled back and the upgrade to %s is stopped", b.Member, b.Version, b.Target))
	case degraded && !h.EtcdAnswered:
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, reason.EtcdUnreachable, a.Message)
	case degraded:
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, reason.MembersUnhealthy, fmt.Sprintf("%d of %d desired members healthy; %s", h.HealthyVoters, h.Replicas, a.Message))
	case h.Slow != "":
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, true, reason.MemberSlow, h.Slow)
	default:
		d = clusterCondition(etcdv1alpha1.ConditionDegraded, false, reason.AsExpected, "no member is missing or unhealthy")
	}
	return &d, w
}

// warnOnce is w unless Degraded already had its reason: a Warning event when a reason first shows.
func warnOnce(h Health, w Warning) *Warning {
	if h.PrevDegraded == w.Reason {
		return nil
	}
	return &w
}

// progressingCondition names the step taken; False when there is nothing to do or nothing can be
// done until the spec changes. A CA rotation under way is named while it lasts.
func progressingCondition(h Health, a Action) Condition {
	if r := h.CARotation; r != nil && a.Reason != reason.RotatingCA { // the rotation's own steps name it
		return clusterCondition(etcdv1alpha1.ConditionProgressing, true, reason.RotatingCA, fmt.Sprintf("CA rotation (%s), phase %s: %s", r.Trigger, r.Phase, a.Message))
	}
	switch a.Kind {
	case None:
		if len(h.VolumesGrowing) > 0 {
			return clusterCondition(etcdv1alpha1.ConditionProgressing, true, reason.ExpandingVolumes, fmt.Sprintf("%s; waiting for the storage driver to grow the volumes of %s to %s",
				a.Message, strings.Join(h.VolumesGrowing, ", "), h.StorageSize))
		}
		return clusterCondition(etcdv1alpha1.ConditionProgressing, false, reason.Ready, a.Message)
	case Wait:
		return clusterCondition(etcdv1alpha1.ConditionProgressing, !Stalled(a), a.Reason, a.Message)
	default:
		return clusterCondition(etcdv1alpha1.ConditionProgressing, true, a.Reason, a.Message)
	}
}

// upgradingCondition is the Upgrading condition; nil, false: it stays as it is; remove: it goes
// (no version known yet).
func upgradingCondition(h Health, a Action) (_ *Condition, remove bool) {
	var u Condition
	switch {
	case !h.Bootstrapped || h.CurrentVersion == "":
		return nil, true
	case h.Blocked != nil:
		b := h.Blocked
		u = clusterCondition(etcdv1alpha1.ConditionUpgrading, false, reason.UpgradeFailed, fmt.Sprintf("%s did not become healthy at %s and was rolled back to %s; change spec.version to retry", b.Member, b.Version, h.CurrentVersion))
	case a.Reason == reason.Upgrading || a.Reason == reason.VersionChangeRefused:
		u = clusterCondition(etcdv1alpha1.ConditionUpgrading, a.Reason == reason.Upgrading, a.Reason, a.Message)
	case h.CurrentVersion == h.TargetVersion:
		u = clusterCondition(etcdv1alpha1.ConditionUpgrading, false, reason.UpToDate, "every member runs "+h.TargetVersion)
	default:
		return nil, false
	}
	return &u, false
}

// Phase is the one-word summary of the cluster (status.phase).
func Phase(h Health, a Action) etcdv1alpha1.ClusterPhase {
	switch {
	case h.Paused:
		return etcdv1alpha1.PhasePaused
	case h.Recovering:
		return etcdv1alpha1.PhaseRecovering
	case h.Migrating:
		return etcdv1alpha1.PhaseMigrating
	case !h.Bootstrapped:
		return etcdv1alpha1.PhaseCreating
	case !h.Quorum() || h.Blocked != nil:
		return etcdv1alpha1.PhaseDegraded
	case a.Reason == reason.ScalingUp || a.Reason == reason.ScalingDown || a.Reason == reason.RebalancingZones || a.Kind == Promote:
		return etcdv1alpha1.PhaseScaling
	case a.Reason == reason.Upgrading:
		return etcdv1alpha1.PhaseUpgrading
	case a.Kind == Wait && a.Reason == reason.VersionChangeRefused:
		return etcdv1alpha1.PhaseRunning
	case a.Kind != None || h.degraded():
		return etcdv1alpha1.PhaseRepairing
	default:
		return etcdv1alpha1.PhaseRunning
	}
}

// Stalled says that nothing is under way until the spec changes: paused, refused or failed.
func Stalled(a Action) bool {
	switch a.Reason {
	case reason.Paused, reason.UpgradeFailed, reason.VersionChangeRefused, reason.MigrationRefused, reason.MigrationSourceUnreachable, reason.MigrationStopped:
		return a.Kind == Wait
	}
	return false
}
