package resources

import (
	"fmt"
	"path"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func TestRestoreOnlyOnBootstrapAndFromARawSource(t *testing.T) {
	c := sample()
	r := &RestoreInput{Source: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "/etcd/old.db"}}}
	in := MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1", "demo-2"}, Bootstrap: true, Restore: r, OperatorImage: "op:1"}
	pod := MemberPod(c, in)
	if len(pod.Spec.InitContainers) != 2 {
		t.Fatalf("%d init containers", len(pod.Spec.InitContainers))
	}
	// It also waits for its peers, on the worker its restore copied in: one copy, one volume.
	if cmd := strings.Join(pod.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "/restore-tools/worker wait-peers") {
		t.Errorf("a restoring member does not wait for its peers: %s", cmd)
	}
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if volumes[v.Name] {
			t.Errorf("volume %s twice", v.Name)
		}
		volumes[v.Name] = true
	}
	restore := pod.Spec.InitContainers[1]
	args := strings.Join(restore.Args, " ")
	for _, want := range []string{
		"--file=/restore-source/etcd/old.db", "--location=pvc://snaps/etcd/old.db", "--name=demo-1",
		"--initial-cluster=" + InitialClusterFlag(c, in.InitialCluster, nil), "--initial-cluster-token=" + ClusterToken(c),
		// Every member gets the same bump, or their revisions would disagree.
		"--bump-revision=1000000000",
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

	// A lone restoring member waits for nobody, and still has its start held until etcd serves, on the
	// same copy of the worker.
	alone := in
	alone.Member, alone.InitialCluster = "demo-0", []string{"demo-0"}
	etcd := MemberPod(c, alone).Spec.Containers[0]
	if etcd.Command[0] != "/usr/local/bin/etcd" || etcd.Lifecycle == nil || etcd.Lifecycle.PostStart.Exec.Command[0] != copiedWorker ||
		!strings.Contains(fmt.Sprint(etcd.VolumeMounts), restoreToolsDir) {
		t.Errorf("a lone restoring member's etcd container: command %v, lifecycle %+v, mounts %+v", etcd.Command, etcd.Lifecycle, etcd.VolumeMounts)
	}

	// Members that join later (and pods recreated after bootstrap) never restore.
	in.Bootstrap = false
	for _, init := range MemberPod(c, in).Spec.InitContainers {
		if init.Name == RestoreContainer {
			t.Fatalf("a joining member restores: %+v", init)
		}
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
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: etcdv1alpha1.EtcdBackupSpec{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "bk", Prefix: "p"}}}}
	b.Status.Location = "s3://bk/p/b.db"
	if src := SnapshotSource(b); src.S3.Prefix != "p/b.db" || b.Spec.Destination.S3.Prefix != "p" {
		t.Errorf("snapshot source %+v (spec %+v)", src.S3, b.Spec.Destination.S3)
	}
}

// TestBackupKeysNeverCollide: two clusters of the same name in two namespaces, two clusters in one
// namespace, and a backup re-created under the name of a deleted one all write to the same bucket
// and prefix (or claim and path): every snapshot gets its own key, under namespace and cluster.
func TestBackupKeysNeverCollide(t *testing.T) {
	backupOf := func(ns, cluster, name, uid string, d etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
		return &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: cluster, Destination: d}}
	}
	s3 := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "shared", Prefix: "team/", Region: "us-east-1", CredentialsSecret: "c"}}
	pvc := etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "etcd"}}
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "a"}}
	for _, d := range []etcdv1alpha1.BackupDestination{s3, pvc} {
		seen := map[string]string{}
		for _, b := range []*etcdv1alpha1.EtcdBackup{
			backupOf("a", "main", "nightly", "11111111-aaaa", d),
			backupOf("b", "main", "nightly", "22222222-bbbb", d),
			backupOf("a", "other", "nightly-2", "33333333-cccc", d),
			backupOf("a", "main", "nightly", "44444444-dddd", d), // re-created after a deletion
		} {
			args := strings.Join(BackupJob(b, c, "op:1", FixedIDs).Spec.Template.Spec.Containers[0].Args, " ")
			var key string
			for _, a := range strings.Fields(args) {
				if strings.HasPrefix(a, "--s3-key=") || strings.HasPrefix(a, "--location=") {
					key = a
				}
			}
			want := b.Namespace + "/" + b.Spec.ClusterName + "/" + b.Name + "-" + string(b.UID)[:8] + ".db"
			if !strings.HasSuffix(key, want) {
				t.Errorf("%s/%s: key %q does not end in %q", b.Namespace, b.Name, key, want)
			}
			if prev, dup := seen[key]; dup {
				t.Errorf("%s and %s/%s share %s", prev, b.Namespace, b.Name, key)
			}
			seen[key] = b.Namespace + "/" + b.Name
		}
	}
	// The longest backup name still makes a valid file name.
	long := backupOf("a", "main", strings.Repeat("n", 253), "55555555-eeee", pvc)
	if base := path.Base(BackupObjectName(long)); len(base) > 255 {
		t.Errorf("file name of %d bytes", len(base))
	}
}

// TestOnlyAChecksummedObjectIsReadByEveryMember: a claim is mounted by one member only (one node
// attaches a ReadWriteOnce volume), and an object without a SHA-256 is read once (it may be
// replaced between two reads); an object with one is fetched by every member, each checking it.
func TestOnlyAChecksummedObjectIsReadByEveryMember(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	s3 := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "b", Prefix: "latest.db"}}
	pvc := etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "latest.db"}}
	for _, tc := range []struct {
		name string
		in   RestoreInput
		one  bool
	}{
		{"an S3 object with a SHA-256", RestoreInput{Source: s3, SHA256: sum, Size: 10}, false},
		{"an S3 object without one", RestoreInput{Source: s3}, true},
		{"a claim without a SHA-256", RestoreInput{Source: pvc}, true},
		{"a claim with one", RestoreInput{Source: pvc, SHA256: sum, Size: 10}, true},
	} {
		if got := tc.in.OneReader(); (got != "") != tc.one {
			t.Errorf("%s: OneReader = %q, want one reader %v", tc.name, got, tc.one)
		}
	}
}
