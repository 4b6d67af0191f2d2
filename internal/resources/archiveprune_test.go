package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// TestSnapshotDeletionPrunesTheChainFirst: the deletion Job of a backup with an etcd cluster ID
// prunes the chain that continues it (beside the snapshot, with the snapshot's bucket and
// credentials, or on its claim) in an init container, then deletes the snapshot as before.
func TestSnapshotDeletionPrunesTheChainFirst(t *testing.T) {
	backupOn := func(d etcdv1alpha1.BackupDestination, location string) *etcdv1alpha1.EtcdBackup {
		return &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly-1", Namespace: "ns", UID: "u"},
			Spec:   etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: d},
			Status: etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, Location: location, Revision: 100, ClusterID: "c0ffee"}}
	}
	s3 := backupOn(etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "bkt", Prefix: "prod", Region: "eu", Endpoint: "http://minio:9000",
		ForcePathStyle: true, CredentialsSecret: "s3"}}, "s3://bkt/prod/ns/demo/nightly-1-u.db")
	pvc := backupOn(etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "etcd"}}, "pvc://snaps/etcd/ns/demo/nightly-1-u.db")
	for _, tc := range []struct {
		name   string
		b      *etcdv1alpha1.EtcdBackup
		before int64
		drop   bool
		want   []string
	}{
		{"S3, before the oldest remaining backup", s3, 250, false, []string{"archive", "prune", "--s3-bucket=bkt", "--s3-region=eu", "--s3-endpoint=http://minio:9000",
			"--s3-path-style", "--s3-prefix=prod/ns/demo/archive/c0ffee", "--before=250"}},
		{"a claim, the whole chain", pvc, 0, true, []string{"archive", "prune", "--dir=/backup/etcd/ns/demo/archive/c0ffee",
			"--location=pvc://snaps/etcd/ns/demo/archive/c0ffee", "--drop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := BackupDeleteJobPruning(tc.b, tc.before, tc.drop, "op:1", FixedIDs)
			plain := BackupDeleteJob(tc.b, "op:1", FixedIDs)
			pod := job.Spec.Template.Spec
			if len(pod.InitContainers) != 1 || !slices.Equal(pod.Containers[0].Args, plain.Spec.Template.Spec.Containers[0].Args) {
				t.Fatalf("init containers %d, main args %v; want the prune first, then the plain deletion", len(pod.InitContainers), pod.Containers[0].Args)
			}
			prune := pod.InitContainers[0]
			if prune.Name != ArchivePruneContainer || !slices.Equal(prune.Args, tc.want) {
				t.Errorf("prune args %v, want %v", prune.Args, tc.want)
			}
			main := pod.Containers[0]
			if prune.Image != main.Image || !slices.EqualFunc(prune.Env, main.Env, func(a, b corev1.EnvVar) bool {
				return a.Name == b.Name && *a.ValueFrom.SecretKeyRef == *b.ValueFrom.SecretKeyRef
			}) ||
				!slices.Equal(prune.VolumeMounts, main.VolumeMounts) || prune.SecurityContext == nil {
				t.Errorf("the prune does not reach the chain as the deletion reaches the snapshot: %+v", prune)
			}
		})
	}
	noID := s3.DeepCopy()
	noID.Status.ClusterID = ""
	if got := BackupDeleteJobPruning(noID, 250, false, "op:1", FixedIDs).Spec.Template.Spec.InitContainers; len(got) != 0 {
		t.Errorf("a backup without an etcd cluster ID: init containers %v", got)
	}
	if got := BackupDeleteJobPruning(s3, 0, false, "op:1", FixedIDs).Spec.Template.Spec.InitContainers; len(got) != 0 {
		t.Errorf("nothing to prune: init containers %v", got)
	}
}
