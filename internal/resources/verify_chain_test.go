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
		return strings.Join(VerifyJob(s, bb, "op:1", "etcd:1", FixedIDs).Spec.Template.Spec.Containers[0].Args, " ")
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
