//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdbackupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// putEach writes n keys under prefix one request each (one revision each) and returns the
// revision of the last.
func putEach(t *testing.T, cl *clientv3.Client, prefix string, n int) int64 {
	t.Helper()
	var rev int64
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cl.Put(ctx, fmt.Sprintf("%s%04d", prefix, i), fmt.Sprintf("v%d", i))
		cancel()
		if err != nil {
			t.Fatalf("put %s%04d: %v", prefix, i, err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// keyspace is every key and value under pitr/, at revision rev (0: the latest).
func keyspace(t *testing.T, cl *clientv3.Client, rev int64) map[string]string {
	const prefix = "pitr/"
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatalf("read %s at revision %d: %v", prefix, rev, err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

func sameKeyspace(got, want map[string]string) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("key %s = %q, want %q", k, got[k], v)
		}
	}
	return nil
}

// TestPointInTimeRestore: a schedule with spec.archive on MinIO runs its archive worker beside a
// 3-member cluster (Archiving=True, the worker not a member); changes after a backup reach the
// archive within seconds, and a writer's changes while the operator is killed, the leader moves and
// the worker's pod is deleted leave a chain that verifies whole (no gap, no overlap); after a mistaken `del --prefix`, new clusters are restored from the
// backup plus the archive to the revision just before the deletion (3 members, one replays, the
// others join) and to an instant before it (1 member): each holds exactly the old cluster's keyspace
// at that point, with its revision raised past the old cluster's and everything before compacted
// (a read at an old revision is refused as compacted, as a kube-apiserver's watch would be), and
// says so in Restored. A target before the backup is refused before any member starts. Then the
// source loses quorum for good (two volumes gone): its FromBackup recovery replays the archive onto the
// backup, and the rebuilt cluster holds exactly what it held before the loss.
func TestPointInTimeRestore(t *testing.T) {
	framework.Parallel(t, 140*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-pitr-")
	op := env.StartOperator(t, ns, "")
	mio := env.DeployMinIO(t, ns, bucket)
	src := env.CreateCluster(t, ns, 3, "3.6.16")
	env.WaitConverged(t, src, 3, convergeTimeout)
	if err := env.K8s.Patch(ctx, src, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"maintenance":{"quorumLoss":"FromBackup"}}}`))); err != nil {
		t.Fatal(err)
	}
	dest := mio.Destination(bucket, "pitr")
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "archived", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "@daily", KeepLast: 3, Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: src.Name, Destination: dest},
		Archive: &etcdv1alpha1.ArchiveSpec{},
	}}
	if err := env.K8s.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "Archiving=True", 3*time.Minute, func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(sched), cur); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, etcdbackupschedule.ConditionArchiving); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Archiving = %+v", c)
		}
		return nil
	})

	cl := env.EtcdClient(t, src)
	putEach(t, cl, "pitr/a/", 50)
	b := waitBackup(t, createBackup(t, ns, "base", src.Name, dest), etcdv1alpha1.BackupSucceeded, 5*time.Minute)
	srcID := env.Get(t, src).Status.ClusterID
	if b.Status.ClusterID != srcID {
		t.Fatalf("backup records cluster %q, the cluster is %q", b.Status.ClusterID, srcID)
	}
	op, written := archiveThroughFaults(t, op, src, cl, sched.Name)
	beforeB := putEach(t, cl, "pitr/b/", 50)
	wantAtBeforeB := keyspace(t, cl, beforeB)
	time.Sleep(3 * time.Second) // an instant well between two archived revisions, whatever the watch delay
	instant := time.Now()
	time.Sleep(3 * time.Second)
	lastGood := putEach(t, cl, "pitr/c/", 20)
	wantAtLastGood := keyspace(t, cl, lastGood)
	for _, k := range written {
		if wantAtLastGood[k] != "v-"+k {
			t.Fatalf("acknowledged write %s missing from the source cluster", k)
		}
	}
	dresp, err := cl.Delete(ctx, "pitr/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	lastRev := putEach(t, cl, "pitr/after/", 5)

	// The archive holds the deletion within seconds (flushInterval 1s plus an upload).
	chain := fmt.Sprintf("pitr/%s/%s/archive/%s/", ns, src.Name, srcID)
	framework.WaitFor(t, "the deletion archived", time.Minute, func() error {
		var last int64
		for _, k := range mio.Keys(t, bucket, chain) {
			if _, l, ok := archive.ParseName(path.Base(k)); ok {
				last = max(last, l)
			}
		}
		if last < lastRev {
			return fmt.Errorf("archived up to revision %d, the last write is %d (the deletion %d)", last, lastRev, dresp.Header.Revision)
		}
		return nil
	})
	if n := len(env.Get(t, src).Status.Members); n != 3 {
		t.Fatalf("%d members: the archive worker counted as one?", n)
	}
	// Across the operator's kill, the leader's move and the worker's restart, the chain from the
	// backup is whole: every revision in exactly one segment, linked, from one cluster.
	rep, err := archive.Verify(ctx, &archive.S3Destination{S3: backup.S3{Endpoint: mio.HostURL, Region: "us-east-1", Bucket: bucket,
		Key: strings.TrimSuffix(chain, "/"), PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}}, b.Status.Revision, 0)
	if err != nil || rep.Last < lastRev {
		t.Fatalf("the archive from revision %d: %+v, %v; want it whole up to %d", b.Status.Revision, rep, err, lastRev)
	}
	t.Logf("archive verified: revisions %d..%d in %d segments", rep.First, rep.Last, rep.Segments)
	// The operator reads the worker's progress: the window starts at the backup (made by hand to
	// the schedule's destination, so the archive continues it) and reaches past it.
	framework.WaitFor(t, "the recoverable window in the schedule's status", 2*time.Minute, func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(sched), cur); err != nil {
			return err
		}
		if w := cur.Status.RecoverableWindow; w == nil || w.EarliestRevision != b.Status.Revision || w.LatestRevision <= b.Status.Revision || !w.EarliestTime.Equal(b.Status.CompletionTime) {
			return fmt.Errorf("window %+v, want from backup %s at revision %d", w, b.Name, b.Status.Revision)
		}
		return nil
	})

	// Too early: refused before any member starts.
	early := createRestoredCluster(t, ns, "too-early", 1, etcdv1alpha1.RestoreSpec{BackupName: b.Name, PointInTime: &etcdv1alpha1.PointInTimeSpec{Revision: b.Status.Revision - 1}})
	toRev := createRestoredCluster(t, ns, "to-revision", 3, etcdv1alpha1.RestoreSpec{BackupName: b.Name, PointInTime: &etcdv1alpha1.PointInTimeSpec{Revision: lastGood}})
	at := metav1.NewTime(instant)
	toTime := createRestoredCluster(t, ns, "to-time", 1, etcdv1alpha1.RestoreSpec{BackupName: b.Name, PointInTime: &etcdv1alpha1.PointInTimeSpec{Time: &at}})
	framework.WaitFor(t, "a target before the backup refused", time.Minute, func() error {
		c := meta.FindStatusCondition(env.Get(t, early).Status.Conditions, etcdv1alpha1.ConditionRestored)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(reason.BackupNotReady) || !strings.Contains(c.Message, "before EtcdBackup") {
			return fmt.Errorf("Restored = %+v", c)
		}
		return nil
	})
	if n := len(env.Get(t, early).Status.Members); n != 0 {
		t.Fatalf("%d members started for a refused target", n)
	}

	for _, tc := range []struct {
		c        *etcdv1alpha1.EtcdCluster
		replicas int32
		rev      int64
		want     map[string]string
	}{{toRev, 3, lastGood, wantAtLastGood}, {toTime, 1, beforeB, wantAtBeforeB}} {
		env.WaitConverged(t, tc.c, tc.replicas, convergeTimeout)
		rcl := env.EtcdClient(t, tc.c)
		if err := sameKeyspace(keyspace(t, rcl, 0), tc.want); err != nil {
			t.Errorf("%s: %v", tc.c.Name, err)
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := rcl.Get(ctx, "pitr/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err != nil || resp.Header.Revision < tc.rev+backup.DefaultBumpMargin {
			t.Errorf("%s: revision %v (%v), want at least %d + the bump", tc.c.Name, resp, err, tc.rev)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		_, err = rcl.Get(ctx, "pitr/", clientv3.WithPrefix(), clientv3.WithRev(tc.rev))
		cancel()
		if !errors.Is(err, rpctypes.ErrCompacted) {
			t.Errorf("%s: a read at the old revision %d: %v, want compacted", tc.c.Name, tc.rev, err)
		}
		c := meta.FindStatusCondition(env.Get(t, tc.c).Status.Conditions, etcdv1alpha1.ConditionRestored)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, fmt.Sprintf("restored to revision %d of the old cluster", tc.rev)) {
			t.Errorf("%s: Restored = %+v", tc.c.Name, c)
		}
		t.Logf("%s: %s", tc.c.Name, c.Message)
	}

	// Quorum lost for good (two of three volumes gone): the FromBackup recovery restores the backup and
	// replays the archive to its end, so nothing written after the backup is lost.
	wantLatest := keyspace(t, cl, 0)
	names := memberNames(env.Get(t, src))
	op.Stop()
	loseMembers(t, ns, names[1:]...)
	env.StartOperator(t, ns, "")
	waitRecovered(t, src, "the cluster rebuilt from the backup and the archive")
	env.WaitConverged(t, src, 3, convergeTimeout)
	if r := env.Get(t, src).Status.Recovery; r.Backup != b.Name || r.Archive != "s3://"+bucket+"/"+strings.TrimSuffix(chain, "/") {
		t.Errorf("recovery %+v: want backup %s and the archive %s", r, b.Name, chain)
	}
	if err := sameKeyspace(keyspace(t, env.EtcdClient(t, src), 0), wantLatest); err != nil {
		t.Errorf("after the recovery: %v (the writes after the backup were lost)", err)
	}
}

// archiveThroughFaults runs a writer under pitr/w/ while the operator is killed, the leader moves
// to another member and the archive worker's pod is deleted at once (no grace), then starts a new
// operator, which brings the worker back, and returns it with the acknowledged keys: the writer must
// resume from the last durable segment, with nothing lost and nothing archived twice.
func archiveThroughFaults(t *testing.T, op *framework.Operator, src *etcdv1alpha1.EtcdCluster, cl *clientv3.Client, schedule string) (*framework.Operator, []string) {
	t.Helper()
	ctx := context.Background()
	w := framework.StartWriter(cl, "pitr/w/")
	time.Sleep(3 * time.Second)
	op.Kill()
	moveLeader(t, src, cl)
	time.Sleep(2 * time.Second)
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: resources.ArchivePodName(schedule)}}
	if err := env.K8s.Delete(ctx, worker, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("delete the archive worker: %v", err)
	}
	time.Sleep(3 * time.Second)
	op = env.StartOperator(t, src.Namespace, "")
	framework.WaitFor(t, "the archive worker back", 3*time.Minute, func() error {
		cur := &corev1.Pod{}
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(worker), cur); err != nil {
			return err
		}
		if cur.UID == worker.UID || cur.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s %s", cur.UID, cur.Status.Phase)
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	acked, _ := w.Finish()
	if len(acked) == 0 {
		t.Fatal("no write acknowledged while the archive was disturbed")
	}
	return op, acked
}

// moveLeader hands the leadership of src to another member, asking the leader itself (etcd refuses
// the request elsewhere), and waits until the members name the new one.
func moveLeader(t *testing.T, src *etcdv1alpha1.EtcdCluster, cl *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var leader uint64
	var leaderEP string
	var others []uint64
	for _, ep := range cl.Endpoints() {
		st, err := cl.Status(ctx, ep)
		if err != nil {
			t.Fatalf("status of %s: %v", ep, err)
		}
		if st.Leader == st.Header.MemberId {
			leader, leaderEP = st.Leader, ep
		} else {
			others = append(others, st.Header.MemberId)
		}
	}
	if leaderEP == "" || len(others) == 0 {
		t.Fatalf("no leader among %v", cl.Endpoints())
	}
	lcl := env.EtcdClientAt(t, src, leaderEP)
	defer func() { _ = lcl.Close() }()
	if _, err := lcl.MoveLeader(ctx, others[0]); err != nil {
		t.Fatalf("move the leadership from %x to %x: %v", leader, others[0], err)
	}
	framework.WaitFor(t, "the new leader", 30*time.Second, func() error {
		st, err := cl.Status(ctx, leaderEP)
		if err != nil {
			return fmt.Errorf("status of %s: %w", leaderEP, err)
		}
		if st.Leader != others[0] {
			return fmt.Errorf("leader %x, want %x", st.Leader, others[0])
		}
		return nil
	})
}
