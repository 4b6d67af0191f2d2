package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// Backup metrics, per cluster, for alerts on stale or failing backups. They are derived from
// EtcdBackup status, so an operator restart rebuilds them from the API.
var (
	backupLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_autopilot_backup_last_success_timestamp_seconds",
		Help: "Completion time of the newest successful EtcdBackup of a cluster.",
	}, []string{"namespace", "cluster"})
	backupLastDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_autopilot_backup_last_duration_seconds",
		Help: "Duration (start to completion) of the newest successful EtcdBackup of a cluster.",
	}, []string{"namespace", "cluster"})
	backupLastSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_autopilot_backup_last_size_bytes",
		Help: "Snapshot size of the newest successful EtcdBackup of a cluster.",
	}, []string{"namespace", "cluster"})
	backupLastFailure = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_autopilot_backup_last_failure_timestamp_seconds",
		Help: "Completion time of the newest failed EtcdBackup of a cluster, by reason.",
	}, []string{"namespace", "cluster", "reason"})
	backupLastVerified = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_autopilot_backup_last_verified_timestamp_seconds",
		Help: "Time of the newest successful test-restore of an EtcdBackupSchedule's backup.",
	}, []string{"namespace", "schedule"})

	// newestRecorded keeps the gauges at the newest backup whatever order backups are reconciled in.
	newestMu       sync.Mutex
	newestRecorded = map[[2]string]float64{}
)

func init() {
	metrics.Registry.MustRegister(backupLastSuccess, backupLastDuration, backupLastSize, backupLastFailure, backupLastVerified)
}

func recordBackupMetrics(b *v1.EtcdBackup) {
	if b.Status.CompletionTime == nil {
		return
	}
	done := float64(b.Status.CompletionTime.Unix())
	if b.Status.Phase == v1.BackupFailed {
		reason := ""
		for _, c := range b.Status.Conditions {
			if c.Type == v1.BackupConditionFailed {
				reason = c.Reason
			}
		}
		backupLastFailure.WithLabelValues(b.Namespace, b.Spec.ClusterName, reason).Set(done)
		return
	}
	key := [2]string{b.Namespace, b.Spec.ClusterName}
	newestMu.Lock()
	defer newestMu.Unlock()
	if newestRecorded[key] > done {
		return
	}
	newestRecorded[key] = done
	backupLastSuccess.WithLabelValues(key[0], key[1]).Set(done)
	backupLastSize.WithLabelValues(key[0], key[1]).Set(float64(b.Status.Size))
	if b.Status.StartTime != nil {
		backupLastDuration.WithLabelValues(key[0], key[1]).Set(b.Status.CompletionTime.Sub(b.Status.StartTime.Time).Seconds())
	}
}
