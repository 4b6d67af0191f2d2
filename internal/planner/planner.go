// Package planner decides the next step for an etcd cluster from what was observed. It is pure:
// no clients, no clock of its own, so every rule is table-tested.
//
// The rules it never breaks:
//   - one membership change at a time, new members join as learners;
//   - no voluntary action unless every member is healthy, and never one that leaves fewer
//     healthy voters than the quorum of the resulting cluster;
//   - a member whose data is lost is removed and replaced under a new name, never re-bootstrapped.
package planner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// PodState is what Kubernetes shows of a member's pod.
type PodState struct {
	Exists bool
	// Version of etcd the pod was built to run (its version label).
	Version  string
	Deleting bool
	// Failed: the pod terminated for good (phase Failed/Succeeded) and must be recreated.
	Failed bool
	// ForceDeleted: the pod's deletion asked for no grace period, so only the API's own cleanup
	// (finalizers) holds it.
	ForceDeleted bool
	IP           string
	// ConfigHash is the configuration the pod was built from; empty for pods of earlier operators.
	ConfigHash string
	// ForceNewCluster: the pod starts etcd with --force-new-cluster (a quorum-loss recovery).
	ForceNewCluster bool
	// Tuned lists the auto-tuned options the pod was built with (resources.TunedAnnotation).
	Tuned string
	// StaleQuota: the pod runs with another database quota than the recorded one (a derived quota
	// raised after the volumes grew); it is rolled like a changed configuration.
	StaleQuota bool
	// SnapshotCount is the --snapshot-count the pod's etcd runs with (0: not known). It differs from
	// Input.SnapshotCount while a changed count is being rolled out.
	SnapshotCount uint64
	// NotReady: the pod exists but Kubernetes does not count it Ready, so the client Service does not
	// route to it (its readiness probe lags etcd's own health by up to a probe period).
	NotReady bool
	// TrustEpoch is the CA-rotation epoch the pod was built at (status.tls.trustEpoch); -1 when
	// not known.
	TrustEpoch int32
	// Created is when the pod was made; UnscheduledSince, the same while the scheduler has not given
	// it a node (zero once it has one).
	Created, UnscheduledSince time.Time
}

// PVCState is what Kubernetes shows of a member's PVC.
type PVCState struct {
	Exists   bool
	Deleting bool
	// Requested is the size the claim asks for; Capacity, the size its volume has (0 until bound).
	Requested, Capacity int64
	// ResizePending: the volume has grown but its file system has not yet (FileSystemResizePending),
	// since ResizePendingSince (zero: unknown). A driver with online expansion has the kubelet grow it
	// while the pod runs; others only when the pod restarts.
	ResizePending      bool
	ResizePendingSince time.Time
}

// EtcdMember is one entry of etcd's member list, joined with that member's own status.
type EtcdMember struct {
	ID      uint64
	Name    string // operator member name, derived from the peer URL (set even before start)
	Learner bool
	Started bool
	// Healthy: the member answered the operator's status call without errors of its own.
	Healthy bool
	// Failing is etcd's own evidence that the member is broken, empty when there is none: the leader
	// no longer reaches it over raft, or it reports a problem of its own (no leader, a CORRUPT alarm).
	// Only this justifies replacing a member: the operator failing to reach it (Healthy false) may
	// be the operator's own network trouble.
	Failing string
	// Slow is etcd's own evidence that the member is much slower than its peers (SlowMembers), the
	// measured figures, empty when there is none.
	Slow      string
	RaftIndex uint64
	// AppliedIndex is the last raft entry the member applied.
	AppliedIndex uint64
	// Version the member reports now (empty when it did not answer).
	Version string
	// StorageVersion is the schema version of its data ("3.5.0"), reported by etcd 3.6+.
	StorageVersion string
	// DowngradeTarget is the downgrade etcd has enabled ("3.5.0"), empty when none.
	DowngradeTarget string
	// DBSize is the size of the member's database file; DBSizeInUse, the part holding data.
	DBSize, DBSizeInUse int64
	// PeerURLs are the URLs etcd's member list has for the member.
	PeerURLs []string
}

// Etcd is the view of the cluster from etcd itself; nil when no member answered.
type Etcd struct {
	Members  []EtcdMember
	LeaderID uint64
	// Revision is the cluster's current key-value revision.
	Revision int64
	// ClusterID is the ID etcd reports for the cluster.
	ClusterID uint64
	// Alarms raised in the cluster, listed when any member reports one.
	Alarms []Alarm
}

// Alarm is one alarm etcd keeps raised; MemberID is the member it was raised on (0: none in
// particular, as etcd 3.5 raises CORRUPT).
type Alarm struct {
	MemberID uint64
	Type     string
}

// KnownMember is a member recorded in status.
type KnownMember struct {
	Name string
	// Version the member last reported.
	Version string
	// FailingSince is when etcd started reporting the member failing, as observed without
	// interruption by this operator (see EtcdMember.Failing).
	FailingSince *time.Time
	// SlowSince is when the member started being slow (EtcdMember.Slow), as measured without
	// interruption by this operator.
	SlowSince *time.Time
	// Zone is the zone the member's pod must run in (status.members[].zone), "" when none: a member
	// added by a zone rebalance.
	Zone string
}

// Pending is a recorded, possibly made, membership call.
type Pending struct {
	Type   etcdv1alpha1.PendingOperationType
	Member string
	ID     uint64
	// Reason and Message are why the call was made; empty for calls recorded by earlier operators.
	Reason  reason.Reason
	Message string
}

// Node-maintenance policies (spec.maintenance.nodeMaintenance).
const (
	NodeMaintenanceWaitForNode = "WaitForNode"
	NodeMaintenanceReplace     = "Replace"
)

// Input is everything the planner looks at.
type Input struct {
	Replicas       int32
	Paused         bool
	EphemeralData  bool // storage.medium Memory: a pod lost is data lost
	Bootstrapped   bool
	Known          []KnownMember
	NextIndex      int32
	Pending        *Pending
	Pods           map[string]PodState
	PVCs           map[string]PVCState
	Etcd           *Etcd
	Now            time.Time
	MemberNameFunc func(index int32) string
	// TargetVersion is spec.version.
	TargetVersion string
	// Blocked is a version whose rollout failed; the operator does not step to it again until
	// the target changes.
	Blocked string
	// UpgradeTimeout is how long a restarted member may take to become healthy at a new version
	// before it is rolled back.
	UpgradeTimeout time.Duration
	// ReplaceAfter is how long etcd must report a member failing (see EtcdMember.Failing), without
	// interruption, before it is replaced.
	ReplaceAfter time.Duration
	// NodeMaintenance is spec.maintenance.nodeMaintenance (WaitForNode or Replace); Cordoned maps each
	// member whose volume is on a cordoned node to that node.
	NodeMaintenance string
	Cordoned        map[string]string
	// Slow is what to do about a member that stays slow.
	Slow SlowPolicy
	// LegacyWALIndex: raft entries up to this index may have been written by etcd 3.5 (see
	// LegacyWALIndex in upgrade.go); SnapshotCount is the --snapshot-count members are built with now.
	LegacyWALIndex uint64
	SnapshotCount  uint64
	// ConfigHash is the configuration member pods should be built from (resources.ConfigHash);
	// Tuned, the auto-tuned options in it (resources.TunedAnnotation).
	ConfigHash string
	Tuned      string
	// Tuning is what auto-tuning decides from; nil when nothing is measured yet.
	Tuning *Tuning
	// DowngradeRecorded is the downgrade target ("3.5.0") the operator recorded before enabling it.
	DowngradeRecorded string
	// Survivors: when no member answers a linearizable call (Etcd nil), what each running member
	// reports of itself.
	Survivors []Survivor
	// QuorumLoss is spec.maintenance.quorumLoss (FromSurvivor, FromBackup or Manual).
	QuorumLoss string
	// RecoveryRequested is the source a human asked to recover from (RecoverAnnotation), "" if none.
	RecoveryRequested string
	// Recovery is the quorum-loss recovery under way, nil when none is.
	Recovery *Recovery
	// Space is the database quota and the defragmentation policy.
	Space Space
	// Volumes is spec.storage.size and whether the volumes can grow to it.
	Volumes Volumes
	// LeaderRequested is the member a human asked to lead (move-leader annotation), "" if none.
	LeaderRequested string
	// DefragRequested, when not nil, is a defragmentation a human asked for (defragment annotation):
	// the members already defragmented since.
	DefragRequested map[string]bool
	// Migration is set while a running cluster is being taken over (spec.bootstrap.migrateFrom).
	Migration *Migration
	// OldStatefulSet names the old members' StatefulSet after a take-over with adoptObjects, until
	// its deletion, or that it was left alone (not the StatefulSet checked before the start), is recorded.
	OldStatefulSet string
	// PeerTLS is set from the end of a take-over of a plain-text cluster into peer TLS until every
	// member's peer URL is TLS.
	PeerTLS *PeerTLSMove
	// CARotation is the CA rotation under way, nil when none is.
	CARotation *CARotation
	// NewestBackup is the EtcdBackup FromBackup restores: the newest verified successful backup of
	// this cluster, else the newest successful one; "" when there is none.
	NewestBackup string
	// BackupNote says which newer backups the choice of NewestBackup passed over as corrupt
	// (BackupChoice.Note); "" when none was.
	BackupNote string
	// Snapshot is what the bootstrap restores; nil when the members start empty.
	Snapshot *Snapshot
	// DivergedMembers are the members whose data the operator's consistency check found diverged
	// from the majority's (status.divergedMembers), with the evidence; Diverged is what to do.
	DivergedMembers map[string]string
	Diverged        DivergedPolicy
	// Placement is where the members run and what the nodes say of zones; Rebalance, the last zone
	// rebalance recorded (status.zoneRebalance), nil when none.
	Placement Placement
	Rebalance *Rebalance
}

// Kind of an action.
type Kind string

const (
	None             Kind = "None"
	Wait             Kind = "Wait"
	InitBootstrap    Kind = "InitBootstrap"
	CreateMembers    Kind = "CreateMembers" // PVC + pod for each of Members (bootstrap: all at once)
	MarkBootstrapped Kind = "MarkBootstrapped"
	AddLearner       Kind = "AddLearner"
	FinishAdd        Kind = "FinishAdd"
	Promote          Kind = "Promote"
	MoveLeader       Kind = "MoveLeader"
	RemoveMember     Kind = "RemoveMember"
	FinishRemove     Kind = "FinishRemove"
	DeletePod        Kind = "DeletePod"
	ForgetMember     Kind = "ForgetMember" // drop a never-added member from status and delete its objects
	// DropPending clears a recorded removal that can no longer be made safely.
	DropPending       Kind = "DropPending"
	DeleteStrayObject Kind = "DeleteStrayObject"
	// RollMember deletes a member's pod so that it is recreated, on its volume, at another version.
	RollMember Kind = "RollMember"
	// EnableDowngrade asks etcd to lower the cluster version to Version ("3.5.0") before any
	// member is restarted at the older minor.
	EnableDowngrade Kind = "EnableDowngrade"
	// CancelDowngrade turns off an enabled downgrade (Version) that spec.version no longer asks for.
	CancelDowngrade Kind = "CancelDowngrade"
	// AdvanceLog appends Count raft entries that touch no key, so that every member snapshots.
	AdvanceLog Kind = "AdvanceLog"
	// AdoptPod records the current ConfigHash on a pod made by an earlier operator version.
	AdoptPod Kind = "AdoptPod"
	// StartRecovery records a quorum-loss recovery (Source, survivor in Members or Backup) before
	// anything irreversible happens.
	StartRecovery Kind = "StartRecovery"
	// StopMembers deletes the pods of the members a recovery leaves behind, keeping their volumes
	// until the survivor serves with everything any of them knew committed.
	StopMembers Kind = "StopMembers"
	// FenceMembers deletes the pods and volumes of the members a recovery leaves behind.
	FenceMembers Kind = "FenceMembers"
	// AdvanceRecovery records the recovery's next Phase.
	AdvanceRecovery Kind = "AdvanceRecovery"
	// RestartFromBackup starts a new bootstrap from Backup, under new member names and a new cluster token.
	RestartFromBackup Kind = "RestartFromBackup"
	// FinishRecovery records that quorum is back.
	FinishRecovery Kind = "FinishRecovery"
	// Compact discards the key history before Revision.
	Compact Kind = "Compact"
	// Defragment rewrites one member's database without its free pages.
	Defragment Kind = "Defragment"
	// DisarmNoSpace clears the NOSPACE alarm.
	DisarmNoSpace Kind = "DisarmNoSpace"
	// DisarmAlarms clears the alarms raised on the member with ID, which is no longer in the cluster.
	DisarmAlarms Kind = "DisarmAlarms"
	// ExpandVolume raises a member claim's request to spec.storage.size.
	ExpandVolume Kind = "ExpandVolume"
	// RaiseQuota records Quota, the database quota derived from the grown volumes.
	RaiseQuota Kind = "RaiseQuota"
	// Retune records the Tuning changes in status; the members are then rolled with them.
	Retune Kind = "Retune"
	// AdvanceCARotation records the next Phase of the CA rotation under way ("" when it is done).
	AdvanceCARotation Kind = "AdvanceCARotation"
)

// Action is the one step to take now.
type Action struct {
	Kind    Kind
	Members []string // member names the action is about
	ID      uint64   // etcd member ID for Promote/RemoveMember/FinishAdd, transferee for MoveLeader
	// Bootstrap is set on CreateMembers for the initial members (initial-cluster-state=new).
	Bootstrap bool
	// Version is the etcd version for the pods CreateMembers makes, or the downgrade target.
	Version string
	// Count of raft entries for AdvanceLog.
	Count uint64
	// Revision to compact at.
	Revision int64
	// Quota is the new database quota for RaiseQuota, in bytes.
	Quota int64
	// ForceNewCluster is set on CreateMembers for a survivor that restarts as a one-member cluster.
	ForceNewCluster bool
	// Tuning are the options Retune changes.
	Tuning []TunedChange
	// Source, Backup and Phase describe a recovery step.
	Source, Backup, Phase string
	// Index is, on StartRecovery, the highest committed raft index any survivor reported.
	Index uint64
	// Zone is, on AddLearner, the zone the new member's pod must run in ("" for none).
	Zone string
	// Reason is a CamelCase word for conditions and events; Message explains it to a human.
	Reason  reason.Reason
	Message string
}

func quorum(voters int) int { return voters/2 + 1 }

// Decide returns the next action.
func Decide(in Input) Action {
	if in.Paused {
		return Action{Kind: Wait, Reason: reason.Paused, Message: "spec.maintenance.paused is set: the operator takes no action"}
	}
	if in.Migration != nil {
		// Before quorum-loss recovery: a cluster being taken over that loses quorum is the old
		// side's to recover; the operator only stops.
		return decideMigration(in)
	}
	if a, ok := decideOldStatefulSet(in); ok {
		return a
	}
	if in.Recovery != nil {
		return decideRecovery(in)
	}
	if in.Bootstrapped && in.Etcd == nil {
		// Before any pending membership call: with quorum gone for good, it can never complete.
		if a, ok := decideQuorumLoss(in); ok {
			return a
		}
	}
	if in.Pending != nil {
		return resumePending(in)
	}
	if !in.Bootstrapped {
		return decideBootstrap(in)
	}
	return decideRunning(in)
}

func resumePending(in Input) Action {
	p := in.Pending
	if in.Etcd == nil {
		return Action{Kind: Wait, Reason: reason.EtcdUnreachable, Message: fmt.Sprintf("cannot confirm the pending %s of %s: no member answers", p.Type, p.Member)}
	}
	m, found := findByName(in.Etcd.Members, p.Member)
	switch p.Type {
	case etcdv1alpha1.PendingAddMember:
		if found {
			return Action{Kind: FinishAdd, Members: []string{p.Member}, ID: m.ID, Reason: reason.MemberAdded, Message: fmt.Sprintf("learner %s is in the member list", p.Member)}
		}
		if down := failingVoter(in.Etcd.Members); down != nil {
			// etcd accepts no addition while a voter is down (its strict reconfiguration check wants
			// every voter connected), and the down voter's replacement waits behind the addition: the
			// addition, never made, is dropped, and planned again from what etcd reports.
			return Action{Kind: ForgetMember, Members: []string{p.Member}, Reason: reason.MembershipChangeDropped, Message: fmt.Sprintf(
				"etcd accepts no member addition while voting member %s is failing (%s): the recorded addition of %s, never made, is dropped", down.Name, down.Failing, p.Member)}
		}
		why, msg := reason.AddingMember, fmt.Sprintf("adding %s as a learner", p.Member)
		if p.Reason != "" {
			why, msg = p.Reason, retried(p.Message, " (retrying the recorded addition)")
		}
		return Action{Kind: AddLearner, Members: []string{p.Member}, Reason: why, Message: msg}
	default: // RemoveMember
		if found {
			if _, safe := safeRemoval(in, m, "", ""); !safe {
				// Recorded while the others were healthy; made now, it would leave fewer healthy voters
				// than a quorum. Dropped, it is planned again should it still be needed once it is safe.
				return Action{Kind: DropPending, Members: []string{p.Member}, Reason: reason.MembershipChangeDropped, Message: fmt.Sprintf(
					"removing %s now would leave fewer healthy voting members than a quorum (%s): the recorded removal is dropped", p.Member, unhealthyNames(in.Etcd.Members))}
			}
			why, msg := reason.RemovingMember, fmt.Sprintf("removing member %s", p.Member)
			if p.Reason != "" {
				why, msg = p.Reason, retried(p.Message, " (retrying the recorded removal)")
			}
			return Action{Kind: RemoveMember, Members: []string{p.Member}, ID: m.ID, Reason: why, Message: msg}
		}
		msg := fmt.Sprintf("member %s is out of the cluster; deleting its pod and volume", p.Member)
		if p.Reason != "" {
			// The removal's own event is raised only when the call returns; one that timed out after
			// etcd applied it never does, so its reason is told here.
			msg = fmt.Sprintf("member %s is out of the cluster (%s: %s); deleting its pod and volume", p.Member, p.Reason, p.Message)
		}
		return Action{Kind: FinishRemove, Members: []string{p.Member}, Reason: reason.MemberRemoved, Message: msg}
	}
}

// retried is the message of a recorded operation being retried. The action's message is recorded
// again with each attempt, so the note is added once: retries must not grow the status.
func retried(msg, note string) string {
	return strings.TrimSuffix(msg, note) + note
}

func decideBootstrap(in Input) Action {
	if len(in.Known) == 0 {
		if a, ok := unusableSnapshot(in); ok {
			return a
		}
		// From NextIndex: a cluster rebuilt from a backup never reuses the names of its old members.
		n, msg := initialMembers(in)
		names := make([]string, n)
		for i := range names {
			names[i] = in.MemberNameFunc(in.NextIndex + int32(i))
		}
		return Action{Kind: InitBootstrap, Members: names, Reason: reason.Bootstrapping, Message: msg}
	}
	var missing []string
	for _, k := range in.Known {
		if !in.Pods[k.Name].Exists || (!in.EphemeralData && !in.PVCs[k.Name].Exists) {
			missing = append(missing, k.Name)
		}
	}
	if len(missing) > 0 {
		if a, ok := unusableSnapshot(in); ok {
			return a
		}
		return Action{Kind: CreateMembers, Members: missing, Bootstrap: true, Version: in.TargetVersion, Reason: reason.Bootstrapping, Message: fmt.Sprintf("starting initial members %v", missing)}
	}
	// Quorum formed: from now on every start must use initial-cluster-state=existing.
	if in.Etcd != nil && len(in.Etcd.Members) > 0 {
		return Action{Kind: MarkBootstrapped, Reason: reason.Bootstrapped, Message: "the initial members formed a cluster"}
	}
	return Action{Kind: Wait, Reason: reason.Bootstrapping, Message: "waiting for the initial members to form a cluster"}
}

func decideRunning(in Input) Action {
	// Pods that died for good are deleted so they can be recreated on their volume, at once: the
	// kubelet sets a terminal phase only once none of the pod's containers runs or will run again,
	// so the name is freed without waiting for the rest of its teardown (the sandbox, the volumes'
	// unmounts), whether someone already deleted the pod or the pod failed.
	for _, k := range in.Known {
		if p := in.Pods[k.Name]; p.Exists && p.Failed && !p.ForceDeleted {
			return Action{Kind: DeletePod, Members: []string{k.Name}, Reason: reason.PodFailed, Message: fmt.Sprintf("pod of %s terminated; recreating it", k.Name)}
		}
	}
	if in.Etcd == nil {
		// With no member answering, the only safe step is bringing back members on their own data.
		if recreate := podsToRecreate(in, nil); len(recreate) > 0 {
			return Action{Kind: CreateMembers, Members: recreate, Version: podVersion(in), Reason: reason.RestartingMembers, Message: fmt.Sprintf("no member answers; restarting %v on their volumes", recreate)}
		}
		return Action{Kind: Wait, Reason: reason.EtcdUnreachable, Message: "no etcd member answers"}
	}
	e := in.Etcd

	// etcd keeps the alarms of a removed member (a CORRUPT member replaced above keeps every write
	// refused cluster-wide): the member list is the evidence that nobody can raise them again.
	for _, a := range e.Alarms {
		if _, member := findByID(e.Members, a.MemberID); a.MemberID != 0 && !member {
			return Action{Kind: DisarmAlarms, ID: a.MemberID, Reason: reason.AlarmOfRemovedMember,
				Message: fmt.Sprintf("disarming the %s alarm of %x, which is no longer a member", a.Type, a.MemberID)}
		}
	}

	// Members in etcd that the operator does not know (created by hand or by a lost add) are removed,
	// when that keeps quorum.
	for _, m := range e.Members {
		if !isKnown(in.Known, m.Name) {
			if a, ok := safeRemoval(in, m, reason.UnknownMember, fmt.Sprintf("member %s (%x) is not part of this cluster's spec", displayName(m), m.ID)); ok {
				return a
			}
		}
	}
	// Members the operator recorded but that are not in etcd were never added: forget them.
	for _, k := range in.Known {
		if _, ok := findByName(e.Members, k.Name); !ok {
			return Action{Kind: ForgetMember, Members: []string{k.Name}, Reason: reason.MemberNotInCluster, Message: fmt.Sprintf("%s is not in the etcd member list; deleting its pod and volume", k.Name)}
		}
	}
	// Pods and PVCs that no member explains (left by a crash or made by hand) are deleted; never one
	// whose name is still in the etcd member list.
	for _, name := range sortedKeys(in.Pods, in.PVCs) {
		if isKnown(in.Known, name) {
			continue
		}
		if _, inEtcd := findByName(e.Members, name); inEtcd {
			continue
		}
		if in.Pods[name].Deleting || (!in.Pods[name].Exists && in.PVCs[name].Deleting) {
			continue
		}
		return Action{Kind: DeleteStrayObject, Members: []string{name}, Reason: reason.StrayObject, Message: fmt.Sprintf("pod/PVC %s belongs to no member; deleting it", name)}
	}
	// Data lost (PVC gone, or an in-memory member whose pod went): remove the member; it is replaced below.
	for _, k := range in.Known {
		m, _ := findByName(e.Members, k.Name)
		if dataLost(in, k.Name, m) {
			if a, ok := safeRemoval(in, m, reason.MemberDataLost, fmt.Sprintf("the data of %s is lost with its volume or pod; removing it so that a new member replaces it", k.Name)); ok {
				return a
			}
		}
	}
	// A member whose pod is gone comes back as the same member on its volume.
	if recreate := podsToRecreate(in, e); len(recreate) > 0 {
		return Action{Kind: CreateMembers, Members: recreate, Version: podVersion(in), Reason: reason.RestartingMembers, Message: fmt.Sprintf("recreating the pods of %v on their volumes", recreate)}
	}
	// A member that was upgraded and does not come back healthy is rolled back, and the upgrade stops.
	if a, ok := failedUpgrade(in, e); ok {
		return a
	}
	// A member etcd has reported failing for long is replaced, if the others keep quorum without it;
	// with nodeMaintenance Replace, at once when its volume is on a cordoned node (a drain).
	for _, k := range in.Known {
		m, _ := findByName(e.Members, k.Name)
		if m.Failing == "" || k.FailingSince == nil {
			continue
		}
		if in.Now.Sub(*k.FailingSince) >= in.ReplaceAfter {
			if a, ok := safeRemoval(in, m, reason.MemberUnhealthy, fmt.Sprintf("%s has been failing since %s (%s); replacing it", k.Name, k.FailingSince.UTC().Format(time.RFC3339), m.Failing)); ok {
				return a
			}
		} else if node := in.Cordoned[k.Name]; node != "" && in.NodeMaintenance == NodeMaintenanceReplace {
			if a, ok := safeRemoval(in, m, reason.MemberOnCordonedNode, fmt.Sprintf("%s is failing (%s) and its volume is on cordoned node %s; replacing it on another node (maintenance.nodeMaintenance Replace)", k.Name, m.Failing, node)); ok {
				return a
			}
		}
	}
	if a, ok := decideDiverged(in, e); ok {
		return a
	}
	if a, ok := cancelDowngrade(in, e); ok {
		return a
	}
	// Before the wait below: a learner that never gets a node would hold every step for ever.
	if a, ok := abandonRebalance(in, e); ok {
		return a
	}

	voters, learners := countRoles(e.Members)
	healthy := allHealthy(e.Members)
	// A caught-up learner is promoted (etcd itself refuses if it is not in sync yet).
	for _, m := range e.Members {
		if m.Learner && m.Started && m.Healthy {
			return Action{Kind: Promote, Members: []string{m.Name}, ID: m.ID, Reason: reason.PromotingLearner, Message: fmt.Sprintf("promoting learner %s to a voting member", m.Name)}
		}
	}
	if !healthy || learners > 0 {
		return Action{Kind: Wait, Reason: reason.WaitingForHealth, Message: fmt.Sprintf("waiting for every member to be healthy (%s)", unhealthyNames(e.Members))}
	}
	return withCARotation(in, e, decideSteady(in, e, voters))
}

// decideSteady is the next step of a cluster whose members are all healthy voters.
func decideSteady(in Input, e *Etcd, voters int) Action {
	if a, ok := decideVolumes(in, e); ok {
		return a
	}
	// A full database stops every writer: before any membership or version change.
	if a, ok := decideSpace(in, e); ok {
		return a
	}
	switch {
	case int32(voters) < in.Replicas:
		name := in.MemberNameFunc(in.NextIndex)
		return Action{Kind: AddLearner, Members: []string{name}, Reason: reason.ScalingUp, Message: fmt.Sprintf("scaling %d -> %d: adding learner %s", voters, in.Replicas, name)}
	case int32(voters) > in.Replicas:
		victim := pickRemoval(in.Known, e.Members, in.Placement)
		why, msg := reason.ScalingDown, fmt.Sprintf("scaling %d -> %d: removing %s", voters, in.Replicas, victim.Name)
		if r := in.Rebalance; r.underway(in.Known) {
			// The learner of a zone move votes now: the move ends with the removal of a crowded zone's member.
			why, msg = reason.RebalancingZones, fmt.Sprintf("%s votes in zone %s: removing %s%s", r.Member, r.Zone, victim.Name, zoneNote(in.Placement, victim.Name))
		}
		if victim.ID == e.LeaderID {
			to := pickTransferee(e.Members, victim.ID)
			return Action{Kind: MoveLeader, Members: []string{victim.Name, to.Name}, ID: to.ID, Reason: why, Message: fmt.Sprintf("moving leadership from %s to %s before removing it", victim.Name, to.Name)}
		}
		return Action{Kind: RemoveMember, Members: []string{victim.Name}, ID: victim.ID, Reason: why, Message: msg}
	}
	if a, ok := decidePeerTLS(in, e); ok {
		return a
	}
	if a, ok := decideSlow(in, e); ok {
		return a
	}
	if a, ok := decideUpgrade(in, e); ok {
		return a
	}
	if a, ok := decideReconfigure(in, e); ok {
		return a
	}
	if a, ok := decideRequests(in, e); ok {
		return a
	}
	if a, ok := decideTuning(in); ok {
		return a
	}
	// Last: a placement that is merely worse than it could be waits for everything else.
	if a, ok := decideRebalance(in); ok {
		return a
	}
	return Action{Kind: None, Reason: reason.Ready, Message: fmt.Sprintf("%d/%d members healthy", voters, in.Replicas)}
}

// safeRemoval removes m unless that leaves fewer healthy voters than the new quorum.
// A learner never counts toward quorum, so removing one is always safe.
func safeRemoval(in Input, m EtcdMember, why reason.Reason, msg string) (Action, bool) {
	if !m.Learner {
		voters, _ := countRoles(in.Etcd.Members)
		healthyOthers := 0
		for _, o := range in.Etcd.Members {
			if o.ID != m.ID && !o.Learner && o.Healthy {
				healthyOthers++
			}
		}
		if healthyOthers < quorum(voters-1) || voters-1 < 1 {
			return Action{}, false
		}
		if m.ID == in.Etcd.LeaderID {
			if in.Pods[m.Name].Deleting {
				// A stopping etcd hands leadership over itself (and if it is killed, the others elect
				// a leader): a transfer asked of it now races its own and can wait out a call timeout.
				return Action{Kind: Wait, Reason: why, Message: msg + "; waiting for leadership to move as its etcd stops"}, true
			}
			to := pickTransferee(in.Etcd.Members, m.ID)
			return Action{Kind: MoveLeader, Members: []string{m.Name, to.Name}, ID: to.ID, Reason: why, Message: msg + "; moving leadership away first"}, true
		}
	}
	return Action{Kind: RemoveMember, Members: []string{m.Name}, ID: m.ID, Reason: why, Message: msg}, true
}

// podsToRecreate lists known members with a PVC but no pod. Without an etcd view (e == nil)
// every such member qualifies; with one, only members that are in the member list.
func podsToRecreate(in Input, e *Etcd) []string {
	var out []string
	for _, k := range in.Known {
		if in.Pods[k.Name].Exists {
			continue
		}
		if e == nil {
			// Blind: only members whose data is certainly there.
			if in.EphemeralData || !in.PVCs[k.Name].Exists || in.PVCs[k.Name].Deleting {
				continue
			}
		} else {
			m, ok := findByName(e.Members, k.Name)
			if !ok || dataLost(in, k.Name, m) {
				continue
			}
		}
		out = append(out, k.Name)
	}
	return out
}

// dataLost says whether member name's data is gone or certain to go: its PVC was deleted after the
// member started, or is being deleted while its pod is gone or stopping; for in-memory members, its pod
// is gone or stopping. A deletion cannot be undone and a stopping pod never comes back, so waiting
// for the pod's termination (seconds of etcd's graceful stop and the kubelet's cleanup) would only
// delay the replacement. A member that never started has no data to lose.
func dataLost(in Input, name string, m EtcdMember) bool {
	pod, pvc := in.Pods[name], in.PVCs[name]
	podGoing := !pod.Exists || pod.Deleting
	if in.EphemeralData {
		return podGoing && m.Started
	}
	return (!pvc.Exists && m.Started) || (pvc.Deleting && podGoing)
}

// pickRemoval chooses the member to remove when scaling down: an unhealthy one first, else one of
// the zone that holds the most members (what is left is then spread the most evenly, and a zone
// move ends in the zone it came from), else the newest.
func pickRemoval(known []KnownMember, ms []EtcdMember, p Placement) EtcdMember {
	order := map[string]int{}
	for i, k := range known {
		order[k.Name] = i
	}
	inZone := map[string]int{} // member -> the members in its zone; empty when zones are not known
	if byZone, ok := membersByZone(p.NodeOf, p.Zones); ok {
		for _, names := range byZone {
			for _, n := range names {
				inZone[n] = len(names)
			}
		}
	}
	cands := append([]EtcdMember(nil), ms...)
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].Healthy != cands[j].Healthy {
			return !cands[i].Healthy
		}
		if zi, zj := inZone[cands[i].Name], inZone[cands[j].Name]; zi != zj {
			return zi > zj
		}
		return order[cands[i].Name] > order[cands[j].Name]
	})
	return cands[0]
}

// pickTransferee chooses the healthy voter with the highest raft index, other than exclude.
func pickTransferee(ms []EtcdMember, exclude uint64) EtcdMember {
	var best EtcdMember
	for _, m := range ms {
		if m.ID == exclude || m.Learner || !m.Healthy {
			continue
		}
		if best.ID == 0 || m.RaftIndex > best.RaftIndex {
			best = m
		}
	}
	return best
}

func sortedKeys(pods map[string]PodState, pvcs map[string]PVCState) []string {
	seen := map[string]bool{}
	var out []string
	for n := range pods {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for n := range pvcs {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func countRoles(ms []EtcdMember) (voters, learners int) {
	for _, m := range ms {
		if m.Learner {
			learners++
		} else {
			voters++
		}
	}
	return voters, learners
}

// failingVoter is a voting member etcd reports failing, nil when there is none.
func failingVoter(ms []EtcdMember) *EtcdMember {
	for i := range ms {
		if !ms[i].Learner && ms[i].Failing != "" {
			return &ms[i]
		}
	}
	return nil
}

func allHealthy(ms []EtcdMember) bool {
	for _, m := range ms {
		if !m.Healthy {
			return false
		}
	}
	return true
}

func unhealthyNames(ms []EtcdMember) string {
	var out []string
	for _, m := range ms {
		if !m.Healthy {
			out = append(out, displayName(m)+" unhealthy")
		} else if m.Learner {
			out = append(out, m.Name+" learning")
		}
	}
	return fmt.Sprint(out)
}

func displayName(m EtcdMember) string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%x", m.ID)
}

func isKnown(known []KnownMember, name string) bool {
	for _, k := range known {
		if k.Name == name {
			return true
		}
	}
	return false
}

func findByID(ms []EtcdMember, id uint64) (EtcdMember, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return EtcdMember{}, false
}

func findByName(ms []EtcdMember, name string) (EtcdMember, bool) {
	for _, m := range ms {
		if m.Name == name && name != "" {
			return m, true
		}
	}
	return EtcdMember{}, false
}
