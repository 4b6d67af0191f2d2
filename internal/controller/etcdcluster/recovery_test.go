package etcdcluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func TestPickBackupForRecovery(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", CreationTimestamp: metav1.NewTime(created)}}
	backup := func(name, cluster string, phase etcdv1alpha1.BackupPhase, doneAfter time.Duration) etcdv1alpha1.EtcdBackup {
		b := etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: cluster}}
		b.Status.Phase = phase
		if phase == etcdv1alpha1.BackupSucceeded {
			at := metav1.NewTime(created.Add(doneAfter))
			b.Status.CompletionTime = &at
		}
		return b
	}
	verifiedBy := func(cluster, name string) etcdv1alpha1.EtcdBackupSchedule {
		s := etcdv1alpha1.EtcdBackupSchedule{Spec: etcdv1alpha1.EtcdBackupScheduleSpec{Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: cluster}}}
		s.Status.LastVerifiedBackup = name
		return s
	}
	condition := func(b etcdv1alpha1.EtcdBackup, status metav1.ConditionStatus, why string) etcdv1alpha1.EtcdBackup {
		b.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.BackupConditionVerified, Status: status, Reason: why, Message: "test-restore"}}
		return b
	}
	corrupt := func(b etcdv1alpha1.EtcdBackup) etcdv1alpha1.EtcdBackup {
		return condition(b, metav1.ConditionFalse, etcdv1alpha1.BackupCorruptReason)
	}
	verified := func(b etcdv1alpha1.EtcdBackup) etcdv1alpha1.EtcdBackup {
		return condition(b, metav1.ConditionTrue, "BackupVerified")
	}
	cases := []struct {
		name      string
		backups   []etcdv1alpha1.EtcdBackup
		schedules []etcdv1alpha1.EtcdBackupSchedule
		want      string
	}{
		{name: "none", want: ""},
		{name: "the newest successful one", backups: []etcdv1alpha1.EtcdBackup{
			backup("old", "main", etcdv1alpha1.BackupSucceeded, time.Hour), backup("new", "main", etcdv1alpha1.BackupSucceeded, 2*time.Hour),
			backup("failed", "main", etcdv1alpha1.BackupFailed, 0), backup("running", "main", etcdv1alpha1.BackupRunning, 0),
		}, want: "new"},
		{name: "another cluster's backups are not this one's data", backups: []etcdv1alpha1.EtcdBackup{
			backup("mine", "main", etcdv1alpha1.BackupSucceeded, time.Hour), backup("other", "second", etcdv1alpha1.BackupSucceeded, 2*time.Hour),
		}, want: "mine"},
		{name: "a namesake's backups from before this cluster existed are not its data", backups: []etcdv1alpha1.EtcdBackup{
			backup("namesake", "main", etcdv1alpha1.BackupSucceeded, -time.Hour),
		}, want: ""},
		{name: "a verified backup beats a newer unverified one", backups: []etcdv1alpha1.EtcdBackup{
			backup("verified", "main", etcdv1alpha1.BackupSucceeded, time.Hour), backup("newer", "main", etcdv1alpha1.BackupSucceeded, 2*time.Hour),
		}, schedules: []etcdv1alpha1.EtcdBackupSchedule{verifiedBy("main", "verified")}, want: "verified"},
		{name: "another cluster's schedule verifies nothing of this one", backups: []etcdv1alpha1.EtcdBackup{
			backup("a", "main", etcdv1alpha1.BackupSucceeded, time.Hour), backup("b", "main", etcdv1alpha1.BackupSucceeded, 2*time.Hour),
		}, schedules: []etcdv1alpha1.EtcdBackupSchedule{verifiedBy("second", "a")}, want: "b"},
		{name: "a backup marked corrupt is never picked, verified or not", backups: []etcdv1alpha1.EtcdBackup{
			backup("good", "main", etcdv1alpha1.BackupSucceeded, time.Hour), corrupt(backup("bad", "main", etcdv1alpha1.BackupSucceeded, 2*time.Hour)),
		}, schedules: []etcdv1alpha1.EtcdBackupSchedule{verifiedBy("main", "bad")}, want: "good"},
		{name: "a Verified condition counts as verified", backups: []etcdv1alpha1.EtcdBackup{
			verified(backup("checked", "main", etcdv1alpha1.BackupSucceeded, time.Hour)), backup("newer", "main", etcdv1alpha1.BackupSucceeded, 2*time.Hour),
		}, want: "checked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := pickBackup(c, tc.backups, tc.schedules).Name; got != tc.want {
				t.Fatalf("picked %q, want %q", got, tc.want)
			}
		})
	}
}
