//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

var runsMu sync.Mutex

const (
	bucket     = "etcd-backups"
	backupKeys = 100_000
)

func createBackup(t *testing.T, ns, name, cluster string, dest etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: cluster, Destination: dest}}
	if err := env.K8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// waitBackup waits until b ends and returns it; it fails the test when b ends in another phase.
func waitBackup(t *testing.T, b *etcdv1alpha1.EtcdBackup, want etcdv1alpha1.BackupPhase, timeout time.Duration) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	out := &etcdv1alpha1.EtcdBackup{}
	framework.WaitFor(t, "backup "+b.Name+" "+string(want), timeout, func() error {
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(b), out); err != nil {
			return err
		}
		switch out.Status.Phase {
		case want:
			return nil
		case etcdv1alpha1.BackupSucceeded, etcdv1alpha1.BackupFailed:
			t.Fatalf("backup %s ended %s: %+v", b.Name, out.Status.Phase, out.Status.Conditions)
		}
		return fmt.Errorf("phase %q %+v", out.Status.Phase, out.Status.Conditions)
	})
	return out
}

func createRestoredCluster(t *testing.T, ns, name string, replicas int32, restore etcdv1alpha1.RestoreSpec) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	c.Spec.Replicas, c.Spec.Version = replicas, "3.6.16"
	// The member volume holds the downloaded snapshot and the restored data side by side.
	c.Spec.Storage.Size = resource.MustParse("512Mi")
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &restore}
	if err := env.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkRestored asserts that every key and value of the source came back, at a revision raised past
// the backup's by the restore's bump, with the old revisions compacted (a watcher of the old cluster
// re-lists instead of waiting for revision numbers the restored cluster would reuse).
func checkRestored(t *testing.T, c *etcdv1alpha1.EtcdCluster, keys []string, b *etcdv1alpha1.EtcdBackup) {
	t.Helper()
	cl := env.EtcdClient(t, c)
	framework.CheckKeys(t, cl, "bk/", keys)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "bk/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != int64(len(keys)) || resp.Header.Revision < b.Status.Revision+backup.DefaultBumpMargin {
		t.Fatalf("%s: %d keys at revision %d; want %d at ≥ %d", c.Name, resp.Count, resp.Header.Revision, len(keys), b.Status.Revision+backup.DefaultBumpMargin)
	}
	if _, err := cl.Get(ctx, "bk/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(b.Status.Revision)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("%s: a read at the backup's revision %d: %v, want compacted", c.Name, b.Status.Revision, err)
	}
	cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionRestored)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("%s: Restored condition %+v", c.Name, cond)
	}
}

// TestBackupAndRestore: a 3-member cluster with 100k keys is backed up to MinIO and to a PVC, and
// each backup (and the S3 object as a raw source) is restored into a new cluster with every key;
// wrong credentials fail clearly and write nothing; a minutely schedule keeps 3 of 5 runs and
// test-restores them; a tampered object is refused before any etcd starts.
func TestBackupAndRestore(t *testing.T) {
	framework.Parallel(t, 320*time.Second)
	ns := env.NewNamespace(t, "e2e-backup-")
	env.StartOperator(t, ns, "")
	ctx := context.Background()
	mio := env.DeployMinIO(t, ns, bucket)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "snapshots", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	if err := env.K8s.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}

	src := env.CreateCluster(t, ns, 3, "3.6.16")
	env.WaitConverged(t, src, 3, 5*time.Minute)
	start := time.Now()
	keys := framework.PutKeys(t, env.EtcdClient(t, src), "bk/", backupKeys)
	t.Logf("wrote %d keys in %s", len(keys), time.Since(start).Round(time.Millisecond))
	// The schedule runs every minute while the rest of the test goes on; checked at the end. Its
	// test-restores run every other minute: the end needs one, and each is a restore and an etcd
	// start that the other tests on this machine wait for.
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "minutely", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "* * * * *", KeepLast: 3, Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: src.Name, Destination: mio.Destination(bucket, "sched")},
		Verify: &etcdv1alpha1.VerifySpec{Schedule: "*/2 * * * *"},
	}}
	if err := env.K8s.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}
	schedStart := time.Now()
	runs := map[string]bool{}
	// Every run is recorded by name (retention deletes the old ones) until the test ends: under load a
	// run can outlast its minute, the next is then skipped, and the five runs take longer than five
	// minutes.
	stopRecording := make(chan struct{})
	t.Cleanup(func() { close(stopRecording) })
	go func() {
		for {
			select {
			case <-stopRecording:
				return
			default:
			}
			list := &etcdv1alpha1.EtcdBackupList{}
			if err := env.K8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{naming.LabelSchedule: sched.Name}); err == nil {
				runsMu.Lock()
				for _, b := range list.Items {
					runs[b.Name] = true
				}
				runsMu.Unlock()
			}
			time.Sleep(2 * time.Second)
		}
	}()

	start = time.Now()
	toS3 := createBackup(t, ns, "to-s3", src.Name, mio.Destination(bucket, "prod"))
	toPVC := createBackup(t, ns, "to-pvc", src.Name, etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snapshots", Path: "etcd"}})
	toS3 = waitBackup(t, toS3, etcdv1alpha1.BackupSucceeded, 5*time.Minute)
	toPVC = waitBackup(t, toPVC, etcdv1alpha1.BackupSucceeded, 5*time.Minute)
	t.Logf("two backups in %s: s3 %+v", time.Since(start).Round(time.Millisecond), toS3.Status)
	// Keys and file names carry namespace and cluster, and the backup's UID against name reuse.
	s3Key := fmt.Sprintf("prod/%s/%s/to-s3-%s.db", ns, src.Name, string(toS3.UID)[:8])
	if toS3.Status.Location != "s3://"+bucket+"/"+s3Key || toPVC.Status.Location != fmt.Sprintf("pvc://snapshots/etcd/%s/%s/to-pvc-%s.db", ns, src.Name, string(toPVC.UID)[:8]) {
		t.Fatalf("locations %s, %s", toS3.Status.Location, toPVC.Status.Location)
	}
	if toS3.Status.Revision < int64(backupKeys/100) || toS3.Status.Size == 0 || len(toS3.Status.SHA256) != 64 || toS3.Status.EtcdVersion != "3.6.16" {
		t.Fatalf("s3 backup status %+v", toS3.Status)
	}
	if st, err := mio.Client.StatObject(ctx, bucket, s3Key, minio.StatObjectOptions{}); err != nil || st.Size != toS3.Status.Size {
		t.Fatalf("stored object: %+v, %v; status says %d bytes", st, err, toS3.Status.Size)
	}

	start = time.Now()
	fromS3 := createRestoredCluster(t, ns, "from-s3", 3, etcdv1alpha1.RestoreSpec{BackupName: toS3.Name})
	fromPVC := createRestoredCluster(t, ns, "from-pvc", 1, etcdv1alpha1.RestoreSpec{BackupName: toPVC.Name})
	// A raw source: the object by its key, no EtcdBackup record (etcdutl checks etcd's own hash).
	raw := mio.Destination(bucket, s3Key)
	fromRaw := createRestoredCluster(t, ns, "from-raw", 1, etcdv1alpha1.RestoreSpec{Source: &raw})
	env.WaitConverged(t, fromS3, 3, 5*time.Minute)
	env.WaitConverged(t, fromPVC, 1, 5*time.Minute)
	env.WaitConverged(t, fromRaw, 1, 5*time.Minute)
	t.Logf("three restores in %s", time.Since(start).Round(time.Millisecond))
	checkRestored(t, fromS3, keys, toS3)
	checkRestored(t, fromPVC, keys, toPVC)
	checkRestored(t, fromRaw, keys, toS3)
	if a, b := env.Get(t, fromS3).Status.ClusterID, env.Get(t, src).Status.ClusterID; a == b || a == "" {
		t.Fatalf("restored cluster ID %q, source %q: want a new one", a, b)
	}

	t.Run("wrong credentials", func(t *testing.T) {
		bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong-creds", Namespace: ns}, StringData: map[string]string{"accessKeyID": "wrong-access-key-7f3a", "secretAccessKey": "not-the-secret"}}
		if err := env.K8s.Create(ctx, bad); err != nil {
			t.Fatal(err)
		}
		dest := mio.Destination(bucket, "wrong")
		dest.S3.CredentialsSecret = bad.Name
		b := waitBackup(t, createBackup(t, ns, "wrong-creds", src.Name, dest), etcdv1alpha1.BackupFailed, 3*time.Minute)
		f := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.BackupConditionFailed)
		if f == nil || f.Reason != string(reason.InvalidCredentials) || b.Status.Location != "" {
			t.Fatalf("failed condition %+v, location %q", f, b.Status.Location)
		}
		if keys := mio.Keys(t, bucket, "wrong/"); len(keys) != 0 {
			t.Fatalf("objects written with wrong credentials: %v", keys)
		}
		for u := range mio.Client.ListIncompleteUploads(ctx, bucket, "wrong/", true) {
			t.Fatalf("an upload was started with wrong credentials: %+v", u)
		}
	})

	t.Run("schedule keeps the last 3 of 5 runs", func(t *testing.T) {
		framework.WaitFor(t, "5 scheduled runs, 3 kept", 8*time.Minute, func() error {
			runsMu.Lock()
			n := len(runs)
			runsMu.Unlock()
			list := &etcdv1alpha1.EtcdBackupList{}
			if err := env.K8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{naming.LabelSchedule: sched.Name}); err != nil {
				return err
			}
			// A run still in progress (under load one can be, at any moment) is not counted yet.
			succeeded, finished, inProgress := 0, 0, 0
			for _, b := range list.Items {
				switch {
				case b.Status.Phase == etcdv1alpha1.BackupSucceeded && b.DeletionTimestamp.IsZero():
					succeeded++
					finished++
				case b.Status.Phase == "" || b.Status.Phase == etcdv1alpha1.BackupPending || b.Status.Phase == etcdv1alpha1.BackupRunning:
					inProgress++
				default:
					finished++
				}
			}
			// Every snapshot has its manifest beside it, deleted with it.
			var objects, manifests []string
			for _, k := range mio.Keys(t, bucket, "sched/") {
				if m, ok := strings.CutSuffix(k, backup.ManifestSuffix); ok {
					manifests = append(manifests, m)
				} else {
					objects = append(objects, k)
				}
			}
			if n < 5 || succeeded != 3 || finished != 3 || inProgress > 1 || len(objects) != 3+inProgress && len(objects) != 3 {
				return fmt.Errorf("%d runs, %d records (%d succeeded, %d in progress), snapshots %v", n, len(list.Items), succeeded, inProgress, objects)
			}
			for _, m := range manifests {
				if !slices.Contains(objects, m) {
					return fmt.Errorf("manifest of %s left without its snapshot (snapshots %v)", m, objects)
				}
			}
			return nil
		})
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(sched), cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.LastSuccessfulTime == nil || cur.Status.LastBackup == "" {
			t.Fatalf("schedule status %+v", cur.Status)
		}
		// Test-restores ran alongside: the newest verified backup is one of the schedule's.
		framework.WaitFor(t, "a verified backup", 2*time.Minute, func() error {
			if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(sched), cur); err != nil {
				return err
			}
			c := meta.FindStatusCondition(cur.Status.Conditions, "Verified")
			if !strings.HasPrefix(cur.Status.LastVerifiedBackup, sched.Name+"-") || c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("last verified %q, condition %+v", cur.Status.LastVerifiedBackup, c)
			}
			return nil
		})
		t.Logf("5 runs and retention in %s", time.Since(schedStart).Round(time.Second))
	})

	t.Run("tampered object", func(t *testing.T) {
		obj, err := mio.Client.GetObject(ctx, bucket, s3Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(obj)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x01
		if _, err := mio.Client.PutObject(ctx, bucket, s3Key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		c := createRestoredCluster(t, ns, "from-tampered", 1, etcdv1alpha1.RestoreSpec{BackupName: toS3.Name})
		framework.WaitFor(t, "restore refused", 3*time.Minute, func() error {
			cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionRestored)
			if cond == nil || cond.Reason != string(reason.SnapshotChecksumMismatch) || cond.Status != metav1.ConditionFalse {
				return fmt.Errorf("restored condition %+v", cond)
			}
			if !strings.Contains(cond.Message, "sha256") {
				return fmt.Errorf("message %q does not explain the checksum", cond.Message)
			}
			return nil
		})
		pod := &corev1.Pod{}
		if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.MemberName(c.Name, 0)}, pod); err != nil {
			t.Fatal(err)
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.State.Running != nil || s.State.Terminated != nil || s.RestartCount > 0 {
				t.Fatalf("etcd started from a tampered snapshot: %+v", s.State)
			}
		}
		if c := env.Get(t, c); c.Status.Bootstrapped {
			t.Fatal("a cluster restored from a tampered snapshot is marked bootstrapped")
		}
	})
}
