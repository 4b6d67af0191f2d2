// Package metrics defines every metric the operator exports, in one place, registered in
// controller-runtime's registry (served on the manager's secure metrics endpoint). Names carry their
// unit (_seconds, _bytes, _ratio, _total); labels are namespace, cluster and, where per member, member —
// never revisions, IDs or UIDs, so a series lives as long as its cluster or member.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
)

const ns = "etcd_autopilot"

func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, labels)
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
}

var cl = []string{"namespace", "cluster"}
var member = []string{"namespace", "cluster", "member"}

// Per EtcdCluster, set once per reconcile pass from what the pass observed (SetCluster).
var (
	MembersDesired = gauge("cluster_members_desired", "Members the EtcdCluster asks for (spec.replicas).", cl...)
	MembersReady   = gauge("cluster_members_ready", "Voting members etcd reports healthy.", cl...)
	MembersVoting  = gauge("cluster_members_voting", "Voting members in etcd's member list.", cl...)
	Learners       = gauge("cluster_members_learners", "Learners (non-voting members) in etcd's member list.", cl...)
	HasLeader      = gauge("cluster_has_leader", "1 when a member reports a leader, else 0.", cl...)
	LeaderChanges  = counter("cluster_leader_changes_total", "Leader changes the operator observed between its passes (it looks at least every 30 s, so changes in between may be missed).", cl...)
	QuorumMargin   = gauge("cluster_quorum_margin", "Healthy voting members beyond the quorum: 0 means one more failure loses quorum, negative means quorum is lost.", cl...)
	Quota          = gauge("cluster_quota_bytes", "Database quota (quota-backend-bytes) the members run with.", cl...)
	Alarms         = gauge("cluster_alarms", "Alarms raised in the cluster, by type (NOSPACE, CORRUPT).", "namespace", "cluster", "type")
	VersionInfo    = gauge("cluster_version_info", "Always 1; the cluster version etcd reports (current) and spec.version (desired) as labels.", "namespace", "cluster", "current", "desired")
	Upgrading      = gauge("cluster_upgrade_in_progress", "1 while the members are rolled to a newer spec.version.", cl...)
	Downgrading    = gauge("cluster_downgrade_in_progress", "1 while an etcd downgrade is enabled or rolled out.", cl...)
	UpgradeBlocked = gauge("cluster_upgrade_blocked", "1 when a version change failed, was rolled back and waits for spec.version to change.", cl...)
	PendingOp      = gauge("cluster_pending_membership_operation", "1 while a membership call is recorded in status.pendingOperation and not yet finished.", cl...)
	Conditions     = gauge("cluster_condition", "Status conditions: 1 when True, 0 when False, with the condition's reason.", "namespace", "cluster", "type", "reason")
	Actions        = counter("cluster_actions_total", "Steps the operator took on a cluster, by action and reason (recoveries: QuorumLost, NoSpace, MemberUnhealthy, MemberDataLost, Defragmenting, …).", "namespace", "cluster", "action", "reason")
	ActionFailures = counter("cluster_action_failures_total", "Steps that failed and are retried with backoff, by action and reason.", "namespace", "cluster", "action", "reason")

	CertificateExpiry = gauge("cluster_certificate_expiry_timestamp_seconds", "When the certificate in each of the cluster's TLS Secrets expires (for the CA Secret, the CA that signs); leaves are renewed 30 days before, the CA rotated a year before.", "namespace", "cluster", "secret")

	MemberDBSize     = gauge("member_db_size_bytes", "Physical size of the member's database file.", member...)
	MemberDBInUse    = gauge("member_db_size_in_use_bytes", "Logical size of the member's database (DB size minus free pages).", member...)
	MemberQuotaUsage = gauge("member_quota_usage_ratio", "The member's database size divided by the quota; NOSPACE is raised at 1.", member...)
	MemberRaftLag    = gauge("member_raft_index_lag", "Raft entries the member is behind the highest raft index in the cluster.", member...)
	MemberHealthy    = gauge("member_healthy", "1 when etcd reports the member healthy, else 0.", member...)
	MemberIsLeader   = gauge("member_is_leader", "1 for the leader, 0 for others.", member...)
	MemberIsLearner  = gauge("member_is_learner", "1 for a learner, 0 for voting members.", member...)
	MemberSlow       = gauge("member_slow", "1 while the member's WAL fsync or backend commit p99 is far above its peers' (status.members[].slowSince), else 0.", member...)

	DivergedMembers   = gauge("cluster_diverged_members", "Members whose data differs from the majority's (status.members[].diverged): contained out of the client Service, and rebuilt under spec.maintenance.divergedMember Rebuild.", cl...)
	ConsistencyChecks = counter("cluster_consistency_checks_total", "Rounds of the operator's consistency check (every member's HashKV at a common revision), by result: agreed, diverged, split (no majority) or inconclusive.", "namespace", "cluster", "result")
)

// Backups, set from EtcdBackup and EtcdBackupSchedule status (rebuilt from the API after a restart).
var (
	BackupLastSuccess  = gauge("backup_last_success_timestamp_seconds", "Completion time of the newest successful EtcdBackup of a cluster.", cl...)
	BackupLastDuration = gauge("backup_last_duration_seconds", "Duration (start to completion) of the newest successful EtcdBackup of a cluster.", cl...)
	BackupLastSize     = gauge("backup_last_size_bytes", "Snapshot size of the newest successful EtcdBackup of a cluster.", cl...)
	BackupLastFailure  = gauge("backup_last_failure_timestamp_seconds", "Completion time of the newest failed EtcdBackup of a cluster, by reason.", "namespace", "cluster", "reason")
	BackupLastVerified = gauge("backup_last_verified_timestamp_seconds", "Time of the newest successful test-restore of an EtcdBackupSchedule's backup.", "namespace", "schedule")
	ScheduleInterval   = gauge("backup_schedule_interval_seconds", "Time between two runs of an EtcdBackupSchedule (0 while suspended), with the cluster it backs up.", "namespace", "schedule", "cluster")
	ScheduleVerifyFail = gauge("backup_schedule_verify_failing", "1 when the newest test-restore of an EtcdBackupSchedule failed, 0 when it succeeded.", "namespace", "schedule", "cluster")
	BackupCorrupt      = gauge("backup_corrupt", "EtcdBackups of a cluster that a test-restore found changed since they were written (condition Verified=False BackupCorrupt): no restore or FromBackup recovery uses them.", cl...)
)

// The continuous archive of an EtcdBackupSchedule, read from its worker on each pass.
var (
	ArchiveLag           = gauge("archive_lag_seconds", "How long revisions the cluster committed may have waited without being stored by the schedule's archive: what a restore to the latest point could miss. Grows while the worker cannot be read.", "namespace", "schedule", "cluster")
	ArchiveFlushInterval = gauge("archive_flush_interval_seconds", "The archive's spec.archive.flushInterval: the lag a healthy archive reaches under writes.", "namespace", "schedule", "cluster")
	ArchiveWindowStart   = gauge("archive_window_earliest_timestamp_seconds", "Earliest instant a point-in-time restore from the schedule's backups and archive reaches (completion of the oldest backup the archive continues).", "namespace", "schedule", "cluster")
	ArchiveWindowEnd     = gauge("archive_window_latest_timestamp_seconds", "When the archive received the last revision it stored: the latest end of the recoverable window.", "namespace", "schedule", "cluster")
)

// Per operator.
var (
	ReconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Name: "reconcile_duration_seconds", Help: "Duration of one reconcile pass, by controller.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"controller"})
	ReconcileErrors = counter("reconcile_errors_total", "Reconcile passes that returned an error, by controller and reason (the API status reason, Timeout, Canceled or Other).", "controller", "reason")
	// EtcdRPCDuration is defined next to the etcd client that observes it (see there why).
	EtcdRPCDuration = etcdclient.RPCDuration
)

// All is every collector above, registered once; the alert test reads it.
var All = []prometheus.Collector{
	MembersDesired, MembersReady, MembersVoting, Learners, HasLeader, LeaderChanges, QuorumMargin, Quota, Alarms,
	VersionInfo, Upgrading, Downgrading, UpgradeBlocked, PendingOp, Conditions, Actions, ActionFailures, CertificateExpiry,
	MemberDBSize, MemberDBInUse, MemberQuotaUsage, MemberRaftLag, MemberHealthy, MemberIsLeader, MemberIsLearner, MemberSlow,
	BackupLastSuccess, BackupLastDuration, BackupLastSize, BackupLastFailure, BackupLastVerified, ScheduleInterval, ScheduleVerifyFail, BackupCorrupt,
	ArchiveLag, ArchiveFlushInterval, ArchiveWindowStart, ArchiveWindowEnd,
	DivergedMembers, ConsistencyChecks,
	ReconcileDuration, ReconcileErrors, EtcdRPCDuration,
}

func init() {
	crmetrics.Registry.MustRegister(All...)
}

// perCluster are the vectors whose series belong to one cluster (labels namespace, cluster first).
var perCluster = []interface {
	DeletePartialMatch(prometheus.Labels) int
}{
	MembersDesired, MembersReady, MembersVoting, Learners, HasLeader, LeaderChanges, QuorumMargin, Quota, Alarms,
	VersionInfo, Upgrading, Downgrading, UpgradeBlocked, PendingOp, Conditions, Actions, ActionFailures, CertificateExpiry,
	MemberDBSize, MemberDBInUse, MemberQuotaUsage, MemberRaftLag, MemberHealthy, MemberIsLeader, MemberIsLearner, MemberSlow,
	BackupLastSuccess, BackupLastDuration, BackupLastSize, BackupLastFailure, DivergedMembers, ConsistencyChecks, BackupCorrupt,
}

// state is what SetCluster must remember between passes: the last leader (for LeaderChanges) and
// the label sets written last, so that series whose labels changed (a removed member, a new reason)
// are deleted rather than left at their last value.
type state struct {
	leader uint64
	series map[*prometheus.GaugeVec][][]string
}

var (
	mu       sync.Mutex
	clusters = map[[2]string]*state{}
)

// ForgetCluster removes every series of a deleted cluster.
func ForgetCluster(namespace, cluster string) {
	mu.Lock()
	defer mu.Unlock()
	delete(clusters, [2]string{namespace, cluster})
	for _, v := range perCluster {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "cluster": cluster})
	}
}

// ForgetSchedule removes the series of a deleted EtcdBackupSchedule.
func ForgetSchedule(namespace, schedule string) {
	ForgetArchive(namespace, schedule)
	for _, v := range []*prometheus.GaugeVec{BackupLastVerified, ScheduleInterval, ScheduleVerifyFail} {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "schedule": schedule})
	}
}

// ForgetArchive removes the archive series of a schedule (its archive was turned off or it was deleted).
func ForgetArchive(namespace, schedule string) {
	for _, v := range []*prometheus.GaugeVec{ArchiveLag, ArchiveFlushInterval, ArchiveWindowStart, ArchiveWindowEnd} {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "schedule": schedule})
	}
}
