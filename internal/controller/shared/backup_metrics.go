package shared

import (
	"sync"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
)

// Backup metrics (defined in internal/metrics) are derived from EtcdBackup status, so an operator
// restart rebuilds them from the API.
var (
	// newestRecorded keeps the gauges at the newest backup whatever order backups are reconciled in.
	newestMu       sync.Mutex
	newestRecorded = map[[2]string]float64{}
)

// ForgetClusterMetrics removes every series of a deleted cluster.
func ForgetClusterMetrics(namespace, cluster string) {
	newestMu.Lock()
	delete(newestRecorded, [2]string{namespace, cluster})
	delete(corruptBackups, [2]string{namespace, cluster})
	newestMu.Unlock()
	metrics.ForgetCluster(namespace, cluster)
}

// RecordBackupMetrics sets the gauges of b's cluster from b once b has finished.
func RecordBackupMetrics(b *etcdv1alpha1.EtcdBackup) {
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

// ForgetBackup stops counting a deleted backup.
func ForgetBackup(namespace, name string) {
	newestMu.Lock()
	defer newestMu.Unlock()
	for key, names := range corruptBackups {
		if key[0] == namespace && names[name] {
			delete(names, name)
			metrics.BackupCorrupt.WithLabelValues(key[0], key[1]).Set(float64(len(names)))
		}
	}
}
