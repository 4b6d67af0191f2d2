package etcdbackupschedule

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
)

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
