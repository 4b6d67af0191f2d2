package resources

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// TestVerifyJobReplaysTheArchiveOfAnArchivingSchedule: the test-restore of a backup whose schedule
// archives names the chain that continues it (beside the snapshot, keyed by its etcd cluster ID),
// so snapshot and chain are verified together; without an archive, or for a backup that records no
// cluster ID, the snapshot alone.
func TestVerifyJobReplaysTheArchiveOfAnArchivingSchedule(t *testing.T) {
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo",
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "bkt", Prefix: "prod", CredentialsSecret: "s3"}}}}
	b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, SHA256: strings.Repeat("ab", 32), Size: 10, Revision: 5,
		Location: "s3://bkt/prod/b.db", ClusterID: "c0ffee"}
	args := func(archive *etcdv1alpha1.ArchiveSpec, clusterID string) string {
		s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{Archive: archive}}
		bb := b.DeepCopy()
		bb.Status.ClusterID = clusterID
		return strings.Join(VerifyJob(s, bb, nil, "op:1", "etcd:1", FixedIDs).Spec.Template.Spec.Containers[0].Args, " ")
	}
	if got := args(&etcdv1alpha1.ArchiveSpec{}, "c0ffee"); !strings.Contains(got, "--archive-prefix=prod/ns/demo/archive/c0ffee") {
		t.Errorf("archiving schedule: args %q lack the chain", got)
	}
	for name, got := range map[string]string{"no archive": args(nil, "c0ffee"), "no cluster ID": args(&etcdv1alpha1.ArchiveSpec{}, "")} {
		if strings.Contains(got, "--archive-") {
			t.Errorf("%s: args %q name a chain", name, got)
		}
	}
}

// TestVerifyJobRechecksTheOtherBackupsInItsStore: the test-restore of the newest backup carries the
// schedule's other backups in the same store (their key, SHA-256 and size), for S3 and claims alike;
// one in another store, one without a recorded SHA-256, and the restored backup itself are left out.
func TestVerifyJobRechecksTheOtherBackupsInItsStore(t *testing.T) {
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"}}
	backupAt := func(name string, dest etcdv1alpha1.BackupDestination, location, sha string) *etcdv1alpha1.EtcdBackup {
		b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: dest}}
		b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, SHA256: sha, Size: 10, Revision: 5, Location: location}
		return b
	}
	s3 := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "bkt", Prefix: "prod", CredentialsSecret: "s3"}}
	other := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "elsewhere", Prefix: "prod", CredentialsSecret: "s3"}}
	sha := strings.Repeat("ab", 32)
	newest := backupAt("b3", s3, "s3://bkt/prod/b3.db", sha)
	args := strings.Join(VerifyJob(s, newest, []*etcdv1alpha1.EtcdBackup{
		newest, backupAt("b2", s3, "s3://bkt/prod/b2.db", sha), backupAt("b1", other, "s3://elsewhere/prod/b1.db", sha), backupAt("b0", s3, "s3://bkt/prod/b0.db", ""),
	}, "op:1", "etcd:1", FixedIDs).Spec.Template.Spec.Containers[0].Args, " ")
	if strings.Count(args, "--recheck=") != 1 || !strings.Contains(args, "--recheck=b2:"+sha+":10:prod/b2.db") {
		t.Errorf("S3: args %q, want b2 rechecked alone", args)
	}

	pvc := etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "prod"}}
	args = strings.Join(VerifyJob(s, backupAt("p2", pvc, "pvc://backups/prod/p2.db", sha), []*etcdv1alpha1.EtcdBackup{backupAt("p1", pvc, "pvc://backups/prod/p1.db", sha)},
		"op:1", "etcd:1", FixedIDs).Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--recheck=p1:"+sha+":10:"+backupVolumeDir+"/prod/p1.db") || !strings.Contains(args, "--file="+backupVolumeDir+"/prod/p2.db") {
		t.Errorf("claim: args %q, want p1 rechecked at its mounted path", args)
	}
}
