package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func TestPickBackupForRecovery(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	c := &v1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", CreationTimestamp: metav1.NewTime(created)}}
	backup := func(name, cluster string, phase v1.BackupPhase, doneAfter time.Duration) v1.EtcdBackup {
		b := v1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.EtcdBackupSpec{ClusterName: cluster}}
		b.Status.Phase = phase
		if phase == v1.BackupSucceeded {
			at := metav1.NewTime(created.Add(doneAfter))
			b.Status.CompletionTime = &at
		}
		return b
	}
	verifiedBy := func(cluster, name string) v1.EtcdBackupSchedule {
		s := v1.EtcdBackupSchedule{Spec: v1.EtcdBackupScheduleSpec{Template: v1.EtcdBackupSpec{ClusterName: cluster}}}
		s.Status.LastVerifiedBackup = name
		return s
	}
	cases := []struct {
		name      string
		backups   []v1.EtcdBackup
		schedules []v1.EtcdBackupSchedule
		want      string
	}{
		{name: "none", want: ""},
		{name: "the newest successful one", backups: []v1.EtcdBackup{
			backup("old", "main", v1.BackupSucceeded, time.Hour), backup("new", "main", v1.BackupSucceeded, 2*time.Hour),
			backup("failed", "main", v1.BackupFailed, 0), backup("running", "main", v1.BackupRunning, 0),
		}, want: "new"},
		{name: "another cluster's backups are not this one's data", backups: []v1.EtcdBackup{
			backup("mine", "main", v1.BackupSucceeded, time.Hour), backup("other", "second", v1.BackupSucceeded, 2*time.Hour),
		}, want: "mine"},
		{name: "a namesake's backups from before this cluster existed are not its data", backups: []v1.EtcdBackup{
			backup("namesake", "main", v1.BackupSucceeded, -time.Hour),
		}, want: ""},
		{name: "a verified backup beats a newer unverified one", backups: []v1.EtcdBackup{
			backup("verified", "main", v1.BackupSucceeded, time.Hour), backup("newer", "main", v1.BackupSucceeded, 2*time.Hour),
		}, schedules: []v1.EtcdBackupSchedule{verifiedBy("main", "verified")}, want: "verified"},
		{name: "another cluster's schedule verifies nothing of this one", backups: []v1.EtcdBackup{
			backup("a", "main", v1.BackupSucceeded, time.Hour), backup("b", "main", v1.BackupSucceeded, 2*time.Hour),
		}, schedules: []v1.EtcdBackupSchedule{verifiedBy("second", "a")}, want: "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := pickBackup(c, tc.backups, tc.schedules); got != tc.want {
				t.Fatalf("picked %q, want %q", got, tc.want)
			}
		})
	}
}
