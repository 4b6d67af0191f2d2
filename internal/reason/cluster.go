package reason

// EtcdCluster: placement (condition Spread).
const (
	// MembersOnSeparateNodes: every member's pod runs on a node of its own, so losing a node loses one member.
	MembersOnSeparateNodes Reason = "MembersOnSeparateNodes"
	// MembersShareANode: two or more members' pods run on one node (the message names them, the node, and whether
	// losing it loses the quorum); the default placement gives each new member a node of its own only when one it
	// may run on is free, and a member on a node-local volume stays on that volume's node.
	// Do: add nodes the members may run on (or relax podTemplate affinity, node selector, tolerations). A member moves
	// only with a fresh volume: delete its PVC, then its pod, and the operator replaces it through a learner, placed on a
	// free node; one member at a time, waiting for Available.
	MembersShareANode Reason = "MembersShareANode"
	// MembersShareAZone: the members' nodes are in zones (topology.kubernetes.io/zone), and one zone holds two or
	// more members than another zone the members can run in (one with a Ready node open to them); the message names
	// the members, the zones, and whether losing the crowded zone loses the quorum. A replacement made while a zone
	// was down lands in the zones left, and stays there when the zone comes back.
	// Do: nothing with the default placement: once the emptier zone has had a Ready node for 2 minutes the operator
	// moves a member there itself (RebalancingZones). With a podTemplate affinity or topologySpreadConstraints of your own,
	// a member moves only with a fresh volume: delete one crowded-zone member's PVC, then its pod, and the operator
	// replaces it through a learner placed as your rules say; one member at a time, waiting for Available.
	MembersShareAZone Reason = "MembersShareAZone"
	// RebalancingZones: a zone that held fewer members than another (after it came back from an outage) has had a
	// Ready node open to the members for 2 minutes, every member is healthy and the default placement is in force
	// (no podTemplate affinity or topologySpreadConstraints): a learner whose pod must run in that zone is added and
	// promoted, then a member of the most crowded zone is removed, so the voting members never drop below
	// spec.replicas. One member is moved at a time.
	RebalancingZones Reason = "RebalancingZones"
	// ZoneRebalanceAbandoned: the learner added to move a member into a zone could not be scheduled there within
	// 5 minutes (no node of the zone has room, or its nodes do not match the pod's node selector or tolerations), or
	// did not start etcd within 15 minutes (its node went away); it is removed (a learner does not vote, so this is
	// always safe) and no new move starts for 30 minutes.
	// Do: give the zone a node the members can run on, or leave the cluster as it is: Spread says what its placement risks.
	ZoneRebalanceAbandoned Reason = "ZoneRebalanceAbandoned"
	// ZonesRebalanced: a zone move (RebalancingZones) is over: the member added in the emptier zone votes, and a
	// member of the crowded zone was removed.
	ZonesRebalanced Reason = "ZonesRebalanced"
)

// EtcdCluster: availability and health (conditions Available and Degraded).
const (
	// QuorumHealthy: a majority of the voting members is healthy; the cluster serves reads and writes.
	QuorumHealthy Reason = "QuorumHealthy"
	// NoReadyEndpoint: etcd has a healthy quorum but no member pod is Ready yet, so the client Service has no endpoint
	// and a client of it gets no answer; it clears once a member passes its readiness probe (etcd's /readyz).
	// Do: nothing if it lasts seconds; otherwise look at the member pods' readiness (kubectl describe pod).
	NoReadyEndpoint Reason = "NoReadyEndpoint"
	// Bootstrapping: the initial members are being created and have not formed a cluster yet.
	// Do: nothing; if it lasts minutes, check that the member pods are scheduled and their volumes bound (kubectl get pods,pvc -l app.kubernetes.io/instance=NAME).
	Bootstrapping Reason = "Bootstrapping"
	// EtcdUnreachable: no member answers the operator; it only restarts members on their own volumes until one does.
	// Do: check the member pods (kubectl etcd logs NAME) and the network between the operator and the members.
	EtcdUnreachable Reason = "EtcdUnreachable"
	// MembersUnhealthy: fewer members are healthy than spec.replicas asks; the operator is repairing.
	// Do: nothing while Progressing shows a step; otherwise check the unhealthy members (kubectl etcd members NAME).
	MembersUnhealthy Reason = "MembersUnhealthy"
	// AsExpected: no member is missing or unhealthy.
	AsExpected Reason = "AsExpected"
	// AlarmRaised: etcd raised an alarm (NOSPACE: writes refused; CORRUPT: a member's data differs); the message names it and the members.
	// Do: NOSPACE is cleared by the operator (compaction, defragmentation, disarm); for CORRUPT, the member is replaced after replaceFailedMemberAfter.
	AlarmRaised Reason = "AlarmRaised"
	// NameConflict: an object the cluster needs exists under its name and is not this cluster's (volumes retained from an earlier cluster of this name, or a Service, Secret, NetworkPolicy, PodDisruptionBudget or pod made by someone else); the operator never starts on it or changes it, and the message names it.
	// Do: delete or rename that object if it is not needed; for retained PVCs whose data you need, restore from them under another cluster name.
	NameConflict Reason = "NameConflict"
	// ActionFailing: the operator's step (named in the message, with its last error) has failed several times in a row;
	// it keeps retrying with backoff, but nothing moves until the cause goes.
	// Do: read the error: an API refusal (quota, admission, a namesake object) needs the cluster or the spec fixed.
	ActionFailing Reason = "ActionFailing"
	// ReconcileFailed: a pass failed before it could decide a step (the message has the error); it is retried with backoff.
	// Do: read the message; API errors usually clear by themselves, RBAC errors need the operator's role fixed.
	ReconcileFailed Reason = "ReconcileFailed"
	// CASecretMissing: the cluster's CA Secret is gone; members keep serving with their certificates, but none is issued or renewed.
	// Do: restore the CA Secret from a backup of it (never a new CA: the members would not trust it).
	CASecretMissing Reason = "CASecretMissing"
	// CASecretUnreadable: the CA Secret exists but holds no usable CA (keys missing or malformed).
	// Do: restore the Secret's original tls.crt/tls.key.
	CASecretUnreadable Reason = "CASecretUnreadable"
	// CAChanged: the CA Secret holds a CA that did not sign the members' certificates (it was replaced by hand).
	// Do: put back the CA that signed the members' certificates; to change the CA, use kubectl etcd rotate-ca.
	CAChanged Reason = "CAChanged"
	// UserCertificatesUnusable: a user-provided certificate Secret (spec.tls.secrets) is missing, lacks a key, is expired,
	// lacks a needed name or usage, or does not chain to the CA that must trust it. No member is created or changed until it is fixed;
	// running members keep serving with the files they have.
	// Do: fix the Secret (or the cert-manager Certificate behind it) as the message says.
	UserCertificatesUnusable Reason = "UserCertificatesUnusable"
)

// EtcdCluster: the operator's steps (condition Progressing, and a Normal event for each step taken).
const (
	// Ready: the cluster is as the spec asks; nothing to do.
	Ready Reason = "Ready"
	// Paused: spec.maintenance.paused is set; the operator takes no action.
	// Do: kubectl etcd resume NAME when done.
	Paused Reason = "Paused"
	// Bootstrapped: the initial members formed a cluster; from now on every member starts with initial-cluster-state=existing.
	Bootstrapped Reason = "Bootstrapped"
	// AddingMember: a member is being added to etcd as a learner.
	AddingMember Reason = "AddingMember"
	// MemberAdded: the learner is in etcd's member list; its pod is being created.
	MemberAdded Reason = "MemberAdded"
	// PromotingLearner: a caught-up learner is being promoted to a voting member.
	PromotingLearner Reason = "PromotingLearner"
	// RemovingMember: a member is being removed from etcd's member list.
	RemovingMember Reason = "RemovingMember"
	// MemberRemoved: the member is out of etcd; its pod and volume are being deleted.
	MemberRemoved Reason = "MemberRemoved"
	// ScalingUp: spec.replicas grew; a learner is added, then promoted.
	ScalingUp Reason = "ScalingUp"
	// ScalingDown: spec.replicas shrank; the newest (or an unhealthy) member is removed, leadership moved away first.
	ScalingDown Reason = "ScalingDown"
	// WaitingForHealth: a step waits until every member is healthy and no learner is catching up.
	// Do: nothing; if it lasts, look at the member the message names (kubectl etcd logs NAME --member M).
	WaitingForHealth Reason = "WaitingForHealth"
	// PodFailed: a member's pod terminated for good; it is deleted and recreated on the member's volume.
	PodFailed Reason = "PodFailed"
	// RestartingMembers: members whose pods are gone are recreated on their volumes, as the same members.
	RestartingMembers Reason = "RestartingMembers"
	// UnknownMember: etcd lists a member the spec does not know (added by hand or by a lost call); it is removed while quorum allows.
	UnknownMember Reason = "UnknownMember"
	// MemberNotInCluster: a member recorded in status was never added to etcd; its pod and volume are deleted.
	MemberNotInCluster Reason = "MemberNotInCluster"
	// MembershipChangeDropped: a member addition or removal recorded while every member was healthy can no longer
	// be made (an addition: etcd accepts none while a voting member is failing; a removal: it would leave fewer
	// healthy voters than a quorum); the record is dropped so that the failing member can be dealt with first, and
	// the change is planned again from what etcd reports.
	MembershipChangeDropped Reason = "MembershipChangeDropped"
	// StrayObject: a pod or PVC with the cluster's labels belongs to no member; it is deleted.
	StrayObject Reason = "StrayObject"
	// MemberDataLost: a member's volume is gone, or being deleted while its pod stops (in-memory members:
	// the pod stops); the member is removed and replaced under a new name, a stopping leader once its etcd
	// has handed leadership over.
	MemberDataLost Reason = "MemberDataLost"
	// MemberUnhealthy: etcd reported a member failing for replaceFailedMemberAfter without interruption; it is replaced.
	// Do: nothing; if members keep failing, look at their nodes and disks.
	MemberUnhealthy Reason = "MemberUnhealthy"
	// MemberOnCordonedNode: with maintenance.nodeMaintenance Replace, etcd reports a member failing whose volume is on
	// a cordoned node (its pod was evicted by a drain); it is replaced at once on another node, while the others keep
	// quorum, instead of waiting for the node.
	MemberOnCordonedNode Reason = "MemberOnCordonedNode"
	// Upgrading: the members are stepping to spec.version, followers first, one at a time (condition Upgrading too).
	Upgrading Reason = "Upgrading"
	// Reconfiguring: members are restarted one at a time to run a changed configuration (resources, options, certificates).
	Reconfiguring Reason = "Reconfiguring"
	// Tuning: auto-tuning (spec.maintenance.autoTuning) changed etcd options spec.etcd leaves unset, from measured peer round-trip times or write rate (status.tuning has the values and the evidence); the members are restarted one at a time, followers first, keeping quorum.
	// Do: nothing; to keep a value, set it in spec.etcd, or set spec.maintenance.autoTuning to Disabled.
	Tuning Reason = "Tuning"
	// AdoptingPod: a pod made by an earlier operator version is adopted without a restart.
	AdoptingPod Reason = "AdoptingPod"
	// UpgradeFailed: a member did not become healthy at the new version within upgradeTimeout; it was rolled back and the version change stopped.
	// Do: read the member's logs (kubectl etcd logs NAME --member M --previous), then set spec.version again (or back) to retry.
	UpgradeFailed Reason = "UpgradeFailed"
	// VersionChangeRefused: spec.version asks for a change etcd cannot make (e.g. skipping a patch floor or a downgrade it refuses); nothing is changed.
	// Do: set spec.version as the message says.
	VersionChangeRefused Reason = "VersionChangeRefused"
	// UpToDate: every member runs spec.version (condition Upgrading False).
	UpToDate Reason = "UpToDate"
	// NoSpace: etcd's NOSPACE alarm is raised and writes are refused; the operator compacts, defragments every member and disarms it.
	// Do: nothing unless NoSpaceLeft follows; find out what filled the database.
	NoSpace Reason = "NoSpace"
	// NoSpaceLeft: after compaction and defragmentation the live data still exceeds the quota; the operator cannot clear NOSPACE.
	// Do: raise spec.etcd.quotaBackendBytes (and spec.storage.size to at least 1.25 times it), or delete keys.
	NoSpaceLeft Reason = "NoSpaceLeft"
	// AlarmOfRemovedMember: an alarm is still raised on a member that has left the cluster (etcd keeps it; a CORRUPT one refuses every write); the operator disarms it.
	AlarmOfRemovedMember Reason = "AlarmOfRemovedMember"
	// NearQuota: a database nears its quota with space to reclaim; members are defragmented one at a time.
	NearQuota Reason = "NearQuota"
	// Defragmenting: a member's database file holds enough free space (spec.maintenance.defragmentation); it is defragmented, the leader last.
	Defragmenting Reason = "Defragmenting"
	// MemberSlow: a member's WAL fsync or backend commit p99 stayed far above its peers' (spec.maintenance.slowMemberReplacement); with policy Replace it is replaced after the policy's delay, one member at a time, never below quorum.
	// Do: look at the member's node and disk (kubectl etcd status NAME shows which member); cordon the node if it is at fault, so that the replacement lands elsewhere.
	MemberSlow Reason = "MemberSlow"
	// ExpandingVolumes: spec.storage.size grew; member claims are grown one at a time, the kubelet grows their file systems while the members run (drivers with online expansion), members whose file system still waits after 3 minutes are restarted one at a time, then a derived quota grows with the volumes.
	// Do: nothing; if the message keeps saying it waits for the storage driver, check the claims' events (kubectl describe pvc).
	ExpandingVolumes Reason = "ExpandingVolumes"
	// VolumeExpansionUnsupported: spec.storage.size asks for more than the volumes have, and their StorageClass cannot grow them (no allowVolumeExpansion, missing, or unreadable); no claim is touched.
	// Do: set spec.storage.size back to the volumes' size, or have an administrator allow expansion on the class if its driver supports it.
	VolumeExpansionUnsupported Reason = "VolumeExpansionUnsupported"
	// LeaderMoveRequested: leadership moves to the member the move-leader annotation names, once nothing else is under way.
	LeaderMoveRequested Reason = "LeaderMoveRequested"
	// DefragmentRequested: the members are defragmented one at a time, the leader last, as the defragment annotation asks, once nothing else is under way.
	DefragmentRequested Reason = "DefragmentRequested"
	// RotatingCA: a CA rotation is under way (TrustNew, SignWithNew, DropOld), each phase restarting every member once.
	RotatingCA Reason = "RotatingCA"
	// WrongCluster: an address where a member of this cluster should answer was answered by another etcd cluster (another cluster ID than status.clusterID), or by another member than the one expected; the operator refuses the answer and sends that address nothing until the member's pod changes.
	// Do: find the pod that holds that IP (kubectl get pods -A -o wide); usually a stale pod IP, which clears once the member's pod is re-created.
	WrongCluster Reason = "WrongCluster"
)

// EtcdCluster: loss of quorum (condition QuorumLost; Degraded carries the same reason while it is True).
const (
	// QuorumLost: a majority of the voting members lost its data for good (or, on the Available condition, is not healthy).
	// Do: with quorumLoss Manual, or when down members will not return: kubectl etcd recover NAME --from Survivor (or Backup).
	QuorumLost Reason = "QuorumLost"
	// Recovering: a quorum-loss recovery is under way (status.recovery has the phase).
	// Do: nothing; follow it with kubectl etcd status NAME.
	Recovering Reason = "Recovering"
	// RecoveryStuck: the recovery cannot go on: the member it recovers from lost its volume.
	// Do: recover from a backup instead: kubectl etcd recover NAME --from Backup.
	RecoveryStuck Reason = "RecoveryStuck"
	// Recovered: quorum is back after a recovery.
	// Do: check what the recovery lost (writes after the survivor's last entry, or after the backup).
	Recovered Reason = "Recovered"
	// NoMajorityLost: no majority of the voting members has lost its data.
	NoMajorityLost Reason = "NoMajorityLost"
)

// EtcdCluster: restoring from a snapshot (condition Restored, clusters with spec.bootstrap.restore only).
const (
	// BackupNotReady: the EtcdBackup to restore does not exist or has not Succeeded yet; no member starts.
	// Do: wait for the backup, or fix spec.bootstrap.restore.backupName (immutable: recreate the cluster).
	BackupNotReady Reason = "BackupNotReady"
	// RestoreSourceUnusable: no member can read the snapshot of spec.bootstrap.restore.source (or of the backup being restored): its claim does not exist, is being deleted, lost its volume, or is a raw block volume; no member starts.
	// Do: create the claim (a filesystem volume holding the snapshot at the given path); the operator checks again by itself. The source is immutable: to use another one, recreate the cluster.
	RestoreSourceUnusable Reason = "RestoreSourceUnusable"
	// Restoring: the initial members are downloading and restoring the snapshot.
	Restoring Reason = "Restoring"
	// Restored: a member's revision reached the snapshot's; the data is back.
	Restored Reason = "Restored"
	// NotRestored: the cluster runs but no member reached the snapshot's revision: the restore did not take.
	// Do: delete the cluster and restore again; report it if it repeats.
	NotRestored Reason = "NotRestored"
)

// EtcdCluster: taking over a running etcd (condition Migrated, clusters with spec.bootstrap.migrateFrom only).
const (
	// Migrating: the operator's members join the running cluster as learners and are promoted, leadership moves to one of them, then the old members are removed one at a time.
	// Do: keep the old members running until the condition says Migrated; clients may keep using the old endpoints until then.
	Migrating Reason = "Migrating"
	// MigrationRefused: the running cluster cannot be taken over as it is (unhealthy, no quorum, a version or setting the operator cannot join); nothing was changed in it.
	// Do: the message says what to fix on the running cluster (for example which version to upgrade it to); the operator checks again every 30 s.
	MigrationRefused Reason = "MigrationRefused"
	// MigrationSourceUnreachable: no endpoint of spec.bootstrap.migrateFrom answered a member list; nothing was changed.
	// Do: check the endpoints (immutable: recreate the EtcdCluster to change them) and that the running cluster has quorum.
	MigrationSourceUnreachable Reason = "MigrationSourceUnreachable"
	// MigrationStopped: during the migration the cluster lost quorum, a member became unhealthy or a member nobody expected joined; the operator takes no step (and never removes an old member) until that is over.
	// Do: bring the old members back (quorum first); remove a member added by hand.
	MigrationStopped Reason = "MigrationStopped"
	// Migrated: every old member is out of the cluster; it runs on the operator's members only, with its cluster ID, keys and revisions unchanged.
	// Do: point clients at the client Service named in the message; scale the old StatefulSet to 0 and delete it and its volumes (with migrateFrom.adoptObjects the operator deletes the StatefulSet itself; the volumes and Services stay yours).
	Migrated Reason = "Migrated"
	// OldStatefulSetKept: after a take-over with migrateFrom.adoptObjects, the StatefulSet named statefulSetName is not the one checked before the start (it was deleted and made again since), or, on a migration started by an operator that recorded no UID, is now controlled by another object; the operator left it alone and does not try again (status.migration.statefulSetKept).
	// Do: look at what that StatefulSet runs; delete it yourself if it is the old members' and no longer needed.
	OldStatefulSetKept Reason = "OldStatefulSetKept"
	// SecuringPeers: after a take-over of a plain-text cluster into peer TLS, the members' peer URLs move to TLS one member at a time, then each member restarts without its plain-text peer listener (status.migration.peerTLS).
	// Do: nothing; it stops while any member is unhealthy and goes on when all are.
	SecuringPeers Reason = "SecuringPeers"
)

// MigrationStops are the reasons a take-over halts at: Migrated=False, with a Warning event when the
// condition arrives at one.
var MigrationStops = map[Reason]Stop{
	MigrationRefused:           {Condition: "Migrated"},
	MigrationSourceUnreachable: {Condition: "Migrated"},
	MigrationStopped:           {Condition: "Migrated"},
}

// EtcdCluster: events only.
const (
	// ActionFailed: a step failed (the message has the error); it is retried after 1 s, 2 s, 4 s … up to 5 min.
	// Do: nothing if it clears; if it repeats, the message says what refused (etcd, the API server).
	ActionFailed Reason = "ActionFailed"
	// RecoveryRequestIgnored: the recover-quorum annotation was removed unused: its value is not a source, or the cluster has quorum.
	// Do: read the message; recover only a cluster whose quorum is lost.
	RecoveryRequestIgnored Reason = "RecoveryRequestIgnored"
	// LeaderMoved: the member the move-leader annotation named leads; the annotation was removed.
	LeaderMoved Reason = "LeaderMoved"
	// LeaderRequestIgnored: the move-leader annotation was removed unused: it names no member, or a learner (which cannot lead).
	// Do: name a voting member (kubectl etcd members NAME).
	LeaderRequestIgnored Reason = "LeaderRequestIgnored"
	// Defragmented: every member was defragmented since the defragment annotation was set; the annotation was removed.
	Defragmented Reason = "Defragmented"
	// PVCsRetained: the cluster was deleted with storage.retentionPolicy Retain; its member volumes are kept.
	// Do: delete the PVCs when their data is no longer needed.
	PVCsRetained Reason = "PVCsRetained"
	// LegacySecretDeleted: the client certificate Secret of operators up to 0.2.0 was deleted; the operator's own is now <cluster>-operator-tls.
	LegacySecretDeleted Reason = "LegacySecretDeleted"
	// NetworkPolicyDeleted: spec.networkPolicy.enabled is false, so the members' NetworkPolicy was deleted.
	NetworkPolicyDeleted Reason = "NetworkPolicyDeleted"
	// CACreated: the cluster's certificate authority was created.
	CACreated Reason = "CACreated"
	// CARotation: a CA rotation changed the trust bundles (the next CA added, or the old one dropped).
	CARotation Reason = "CARotation"
	// CARotated: a CA rotation finished; every member trusts and presents certificates of the new CA only.
	CARotated Reason = "CARotated"
	// CertificateRenewed: a leaf certificate was re-issued (near expiry, missing a name, or asked for with renew-certs).
	CertificateRenewed Reason = "CertificateRenewed"
)

// EtcdCluster: the consistency guardian (Degraded, and the rebuild's steps).
const (
	// MemberDiverged: a member's HashKV at a revision all members hold differs from the hash a strict majority of the voting members agree on; the message has the revision and every member's hash.
	// The member is out of the client Service at once (its pod loses the etcd.autopilot.dev/serving label); with spec.maintenance.divergedMember Rebuild it is removed and replaced by a new learner on a fresh volume while quorum allows.
	// Do: with Report, keep a copy of the member's volume for investigation, then remove the member (kubectl etcd members NAME) or switch to Rebuild.
	MemberDiverged Reason = "MemberDiverged"
	// HashesDisagree: the members' HashKV at a common revision differ and no hash is shared by a strict majority of the voting members; the operator cannot tell which data is right and changes nothing.
	// Do: compare the members' data (etcdctl endpoint hashkv, get --consistency=s at each member), decide which is right, and restore or replace the others by hand.
	HashesDisagree Reason = "HashesDisagree"
)
