package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
)

// Backup metrics (defined in internal/metrics) are derived from EtcdBackup status, so an operator
// restart rebuilds them from the API.
var (
	// newestRecorded keeps the gauges at the newest backup whatever order backups are reconciled in.
	newestMu       sync.Mutex
	newestRecorded = map[[2]string]float64{}
)

// forgetClusterMetrics removes every series of a deleted cluster.
func forgetClusterMetrics(namespace, cluster string) {
	newestMu.Lock()
	delete(newestRecorded, [2]string{namespace, cluster})
	delete(corruptBackups, [2]string{namespace, cluster})
	newestMu.Unlock()
	metrics.ForgetCluster(namespace, cluster)
}

func recordBackupMetrics(b *etcdv1alpha1.EtcdBackup) {
	if b.Status.CompletionTime == nil {
		return
	}
	recordBackupCorrupt(b)
	done := float64(b.Status.CompletionTime.Unix())
	if b.Status.Phase == etcdv1alpha1.BackupFailed {
		reason := ""
		for _, c := range b.Status.Conditions {
			if c.Type == etcdv1alpha1.BackupConditionFailed {
				reason = c.Reason
			}
		}
		metrics.BackupLastFailure.WithLabelValues(b.Namespace, b.Spec.ClusterName, reason).Set(done)
		return
	}
	key := [2]string{b.Namespace, b.Spec.ClusterName}
	newestMu.Lock()
	defer newestMu.Unlock()
	if newestRecorded[key] > done {
		return
	}
	newestRecorded[key] = done
	metrics.BackupLastSuccess.WithLabelValues(key[0], key[1]).Set(done)
	metrics.BackupLastSize.WithLabelValues(key[0], key[1]).Set(float64(b.Status.Size))
	if b.Status.StartTime != nil {
		metrics.BackupLastDuration.WithLabelValues(key[0], key[1]).Set(b.Status.CompletionTime.Sub(b.Status.StartTime.Time).Seconds())
	}
}

// corruptBackups are the names of the backups marked corrupt, by namespace and cluster.
var corruptBackups = map[[2]string]map[string]bool{}

// recordBackupCorrupt counts b in etcd_autopilot_backup_corrupt while it is marked corrupt.
func recordBackupCorrupt(b *etcdv1alpha1.EtcdBackup) {
	key := [2]string{b.Namespace, b.Spec.ClusterName}
	newestMu.Lock()
	defer newestMu.Unlock()
	if corruptBackups[key] == nil {
		corruptBackups[key] = map[string]bool{}
	}
	if corrupt, _ := b.Corrupt(); corrupt {
		corruptBackups[key][b.Name] = true
	} else {
		delete(corruptBackups[key], b.Name)
	}
	metrics.BackupCorrupt.WithLabelValues(key[0], key[1]).Set(float64(len(corruptBackups[key])))
}

// forgetBackup stops counting a deleted backup.
func forgetBackup(namespace, name string) {
	newestMu.Lock()
	defer newestMu.Unlock()
	for key, names := range corruptBackups {
		if key[0] == namespace && names[name] {
			delete(names, name)
			metrics.BackupCorrupt.WithLabelValues(key[0], key[1]).Set(float64(len(names)))
		}
	}
}

// recordScheduleMetrics exports what alerts on a schedule need: how often it runs (a backup older than
// about two intervals is overdue) and whether its newest test-restore failed.
func recordScheduleMetrics(s *etcdv1alpha1.EtcdBackupSchedule, now time.Time) {
	labels := []string{s.Namespace, s.Name, s.Spec.Template.ClusterName}
	interval := 0.0
	if sched, err := backupschedule.Parse(s.Spec.Schedule); err == nil && !s.Spec.Suspend {
		next := sched.Next(now)
		interval = sched.Next(next).Sub(next).Seconds()
	}
	metrics.ScheduleInterval.WithLabelValues(labels...).Set(interval)
	if c := meta.FindStatusCondition(s.Status.Conditions, ConditionVerified); c != nil {
		failing := 0.0
		if c.Status != metav1.ConditionTrue {
			failing = 1
		}
		metrics.ScheduleVerifyFail.WithLabelValues(labels...).Set(failing)
	} else {
		metrics.ScheduleVerifyFail.DeleteLabelValues(labels...)
	}
}
