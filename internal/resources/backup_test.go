package resources

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func TestRestoreOnlyOnBootstrapAndFromARawSource(t *testing.T) {
	c := sample()
	r := &RestoreInput{Source: v1.BackupDestination{PVC: &v1.PVCDestination{ClaimName: "snaps", Path: "/etcd/old.db"}}, OperatorImage: "op:1"}
	in := MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1", "demo-2"}, Bootstrap: true, Restore: r}
	pod := MemberPod(c, in)
	if len(pod.Spec.InitContainers) != 2 {
		t.Fatalf("%d init containers", len(pod.Spec.InitContainers))
	}
	restore := pod.Spec.InitContainers[1]
	args := strings.Join(restore.Args, " ")
	for _, want := range []string{
		"--file=/restore-source/etcd/old.db", "--location=pvc://snaps/etcd/old.db", "--name=demo-1",
		"--initial-cluster=" + InitialClusterFlag(c, in.InitialCluster), "--initial-cluster-token=" + ClusterToken(c),
	} {
		if !strings.Contains(args, want) {
			t.Errorf("restore args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "--sha256") {
		t.Errorf("a raw source has no recorded checksum, yet: %s", args)
	}
	if restore.Image != in.Image || *restore.SecurityContext.RunAsNonRoot != true || !*restore.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("restore container: image %s, security %+v", restore.Image, restore.SecurityContext)
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "snaps" && !v.PersistentVolumeClaim.ReadOnly {
			t.Error("the snapshot claim is mounted writable into a member")
		}
	}

	// Members that join later (and pods recreated after bootstrap) never restore.
	in.Bootstrap = false
	if p := MemberPod(c, in); len(p.Spec.InitContainers) != 0 {
		t.Fatalf("a joining member restores: %+v", p.Spec.InitContainers)
	}
}

func TestBackupJobNamesFitLabels(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, n := range []string{BackupJobName(long), BackupDeleteJobName(long), VerifyJobName(long)} {
		if len(n) > 63 {
			t.Errorf("%s: %d characters", n, len(n))
		}
	}
	if BackupJobName(long+"x") == BackupJobName(long+"y") {
		t.Error("truncated names collide")
	}
	b := &v1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1.EtcdBackupSpec{Destination: v1.BackupDestination{S3: &v1.S3Destination{Bucket: "bk", Prefix: "p"}}}}
	b.Status.Location = "s3://bk/p/b.db"
	if src := SnapshotSource(b); src.S3.Prefix != "p/b.db" || b.Spec.Destination.S3.Prefix != "p" {
		t.Errorf("snapshot source %+v (spec %+v)", src.S3, b.Spec.Destination.S3)
	}
}
