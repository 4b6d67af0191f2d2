//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/test/chaos"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// A value changed in place in a stopped follower's database file (bbolt), as a bad disk would, and
// the follower started again: etcd's initial corruption check refuses its data. The operator reads
// etcd's refusal from the pod, records the member diverged with the hashes, reports it, and rebuilds
// it from its peers (removed, then a new member on a fresh volume). Meanwhile a client pinned to the
// member never gets an answer from it, a porcupine-checked workload through the others sees no
// violation and no lost write, and afterwards every member's HashKV agrees.
// Auto-compaction is off: a compaction between the stop and the start would make etcd's initial check
// skip the comparison (different compactions), and the operator's hash rounds would find it instead.
func TestDivergedFollowerIsRefusedAndRebuilt(t *testing.T) {
	framework.Parallel(t, 55*time.Second)
	ctx := context.Background()
	const victimKey, good, bad = "/diverged/victim", "good", "changed-on-disk"
	ns := env.NewNamespace(t, "e2e-diverged-")
	env.StartOperator(t, ns, "")
	c := createWith(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Etcd.AutoCompactionRetention = "0"
		c.Spec.Maintenance.AutoTuning = etcdv1alpha1.AutoTuningDisabled
	})
	victim, victimIP := follower(t, c)
	cl := env.EtcdClient(t, c)
	if _, err := cl.Put(ctx, victimKey, good); err != nil {
		t.Fatal(err)
	}
	pinned := env.EtcdClientAt(t, c, naming.EndpointForIP(victimIP, true))
	t.Cleanup(func() { _ = pinned.Close() })
	framework.WaitFor(t, victim+" applied the key", time.Minute, func() error {
		r, err := pinned.Get(ctx, victimKey, clientv3.WithSerializable())
		if err != nil || len(r.Kvs) != 1 {
			return fmt.Errorf("%v %w", r, err)
		}
		return nil
	})

	const clients = 3
	var cls []*clientv3.Client
	for range clients {
		wcl := env.EtcdClient(t, c)
		t.Cleanup(framework.FollowPods(wcl, func() ([]string, error) { return env.CurrentEndpoints(c) }))
		cls = append(cls, wcl)
	}
	w, err := chaos.Start(ctx, chaos.Config{Prefix: "/diverged/w/", Keys: 10, Seed: uint64(time.Now().UnixNano()), OpTimeout: 2 * time.Second, Pause: 20 * time.Millisecond}, cls)
	if err != nil {
		t.Fatal(err)
	}

	// Stop the follower with the operator paused (so nothing recreates it), and change the key's
	// stored value in its database file on the host.
	env.SetPaused(t, c, true, time.Minute)
	pod := &corev1.Pod{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, pod); err != nil {
		t.Fatal(err)
	}
	claim := ""
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if err := env.K8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, victim+"'s pod gone", 2*time.Minute, func() error {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	etcdtest.CorruptDB(t, filepath.Join(hostVolumeDir(t, ns, claim), "data", "member", "snap", "db"), victimKey, bad)
	started := time.Now()
	env.SetPaused(t, c, false, time.Minute)

	// A client pinned to the victim's pod, whatever its address: it must never be answered.
	var mu sync.Mutex
	var served []string
	pinnedIP := victimIP
	stopPinned := framework.Every(300*time.Millisecond, func() {
		p := &corev1.Pod{}
		if env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, p) != nil || p.Status.PodIP == "" {
			return
		}
		if p.Status.PodIP != pinnedIP {
			pinnedIP = p.Status.PodIP
			pinned.SetEndpoints(naming.EndpointForIP(pinnedIP, true))
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if r, err := pinned.Get(rctx, victimKey, clientv3.WithSerializable()); err == nil {
			mu.Lock()
			served = append(served, fmt.Sprintf("%s at %s: %v", p.Status.PodIP, time.Since(started).Round(time.Second), r.Kvs))
			mu.Unlock()
		}
	})

	// The record in status lasts only until the member is removed (a pass or two), so the event,
	// which stays, is what is waited for; detection is timed from the etcd container's start.
	var report *corev1.Event
	framework.WaitFor(t, victim+" reported diverged", 3*time.Minute, func() error {
		report = eventAfter(t, ns, "MemberDiverged", "the data of "+victim+" diverged", started)
		if report == nil {
			return fmt.Errorf("no event yet")
		}
		return nil
	})
	etcdStarted := eventAfter(t, ns, "Started", "container etcd", started)
	if etcdStarted == nil || etcdStarted.InvolvedObject.Name != victim {
		t.Fatalf("no start of %s's etcd container after %s: %v", victim, started, etcdStarted)
	}
	detected := eventTime(report).Sub(eventTime(etcdStarted))
	if detected > time.Minute {
		t.Errorf("%s reported diverged %s after its etcd started, more than a minute", victim, detected)
	}
	waitReplaced(t, c, victim)
	env.WaitConverged(t, c, 3, convergeTimeout)
	rebuilt := time.Since(started)
	stopPinned()
	cur := env.Get(t, c)
	if cond := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded); cond != nil && cond.Status == "True" {
		t.Errorf("still Degraded after the rebuild: %s: %s", cond.Reason, cond.Message)
	}
	mu.Lock()
	if len(served) > 0 {
		t.Errorf("the diverged member answered a client pinned to it: %v", served)
	}
	mu.Unlock()

	history := w.Stop()
	env.RefreshEndpoints(t, cls[0], c)
	v, err := chaos.Verify(w, history, cls[0], clients, 2*time.Minute, filepath.Join(os.TempDir(), "etcd-autopilot-diverged"))
	if err != nil {
		t.Fatal(err)
	}
	if v.CheckErr != nil || v.Result != porcupine.Ok {
		t.Errorf("the workload's history is %s (%v): visualisation in %s", v.Result, v.CheckErr, v.Visualisation)
	}
	for _, op := range v.Lost {
		t.Errorf("acknowledged write lost: %s=%q at revision %d", op.Input.Key, op.Input.Value, op.Output.Revision)
	}
	if len(v.Phantom) > 0 {
		t.Errorf("writes nobody made: %v", v.Phantom)
	}
	hashes := equalHashes(t, cls[0], c)
	r, err := cls[0].Get(ctx, victimKey)
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != good {
		t.Fatalf("%s after the rebuild: %v %v", victimKey, r, err)
	}
	t.Logf("diverged member reported %s after its etcd started (%s after the operator was resumed): %q; rebuilt and converged %s after the operator was resumed; HashKV %s; workload: %d operations linearizable, %d final reads",
		detected, eventTime(report).Sub(started).Round(time.Second), report.Message, rebuilt.Round(time.Second), hashes, len(v.Resolved), v.Final)
}

// eventAfter is the earliest event in ns of reason whose message holds text, at or after since (to
// the second, events' resolution); nil when there is none.
func eventAfter(t *testing.T, ns, reason, text string, since time.Time) *corev1.Event {
	t.Helper()
	evs := &corev1.EventList{}
	if err := env.K8s.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var first *corev1.Event
	for i := range evs.Items {
		e := &evs.Items[i]
		at := eventTime(e)
		if e.Reason != reason || !strings.Contains(e.Message, text) || at.Before(since.Truncate(time.Second)) {
			continue
		}
		if first == nil || at.Before(eventTime(first)) {
			first = e
		}
	}
	return first
}

func eventTime(e *corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// hostVolumeDir is where the volume bound to claim lives on this machine: the local cluster's volumes
// are directories of the host (csi-hostpath's, or local-path's).
func hostVolumeDir(t *testing.T, ns, claim string) string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := env.K8s.Get(context.Background(), client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	switch s := pv.Spec.PersistentVolumeSource; {
	case s.CSI != nil:
		return filepath.Join(filepath.Dir(env.Kubeconfig), "csi-hostpath", "volumes", s.CSI.VolumeHandle)
	case s.Local != nil:
		return s.Local.Path
	case s.HostPath != nil:
		return s.HostPath.Path
	}
	t.Fatalf("volume %s of %s is not on this host's filesystem", pv.Name, claim)
	return ""
}

// equalHashes waits until every member answers HashKV at one revision with the same hash, and
// returns them in words.
func equalHashes(t *testing.T, cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	var out string
	framework.WaitFor(t, "HashKV equal on every member", time.Minute, func() error {
		eps, err := env.CurrentEndpoints(c)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var rev int64
		for _, ep := range eps {
			s, err := cl.Status(ctx, ep)
			if err != nil {
				return err
			}
			if rev == 0 || s.Header.Revision < rev {
				rev = s.Header.Revision
			}
		}
		hashes := map[uint32]bool{}
		out = fmt.Sprintf("at revision %d:", rev)
		for _, ep := range eps {
			h, err := cl.HashKV(ctx, ep, rev)
			if err != nil {
				return err
			}
			hashes[h.Hash] = true
			out += fmt.Sprintf(" %x=%d", h.Header.MemberId, h.Hash)
		}
		if len(hashes) != 1 || len(eps) != 3 {
			return fmt.Errorf("%d members, hashes %s", len(eps), out)
		}
		return nil
	})
	return out
}

// identityGID is the operator's primary group in TestAnswerFromAnotherClusterIsRefused (its own, so
// the redirect touches no other test's operator).
const identityGID = 4343

// The operator of cluster A reaches one of A's members at its pod address, but another cluster (B)
// answers there, as when a pod address is reused by another cluster's member (plain-text clusters, or
// clusters sharing a CA, accept each other's clients). The answers carry B's cluster ID: the operator
// refuses them, reports Degraded=WrongCluster, and does nothing on their word. A's members and their IDs
// stay, though replaceFailedMemberAfter (10 s) passes many times over, and B is untouched. Once the
// address is A's member's again, A is healthy again.
func TestAnswerFromAnotherClusterIsRefused(t *testing.T) {
	framework.Parallel(t, 65*time.Second)
	plain := func(replaceAfter string) func(*etcdv1alpha1.EtcdCluster) {
		return func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS.Client, c.Spec.TLS.Peer = etcdv1alpha1.TLSDisabled, etcdv1alpha1.TLSDisabled
			c.Spec.Maintenance.ReplaceFailedMemberAfter = replaceAfter
		}
	}
	nsB := env.NewNamespace(t, "e2e-identity-b-")
	env.StartOperator(t, nsB, "")
	b := createWith(t, nsB, plain("5m"))
	nsA := env.NewNamespace(t, "e2e-identity-a-")
	opA := env.StartOperatorInGroup(t, nsA, identityGID)
	a := createWith(t, nsA, plain("10s"))

	idsA, idsB := statusMemberIDs(t, a), statusMemberIDs(t, b)
	_, victimIP := follower(t, a)
	_, otherIP := follower(t, b)
	// A new operator process, so that every connection to the victim's address is opened after the
	// redirect.
	opA.Stop()
	restore := framework.RedirectOperator(t, identityGID, victimIP, otherIP, naming.ClientPort)
	opA = env.StartOperatorInGroup(t, nsA, identityGID)

	framework.WaitFor(t, "A reports the answers from B refused", 2*time.Minute, func() error {
		cond := meta.FindStatusCondition(env.Get(t, a).Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if cond == nil || cond.Reason != "WrongCluster" {
			return fmt.Errorf("Degraded %v", cond)
		}
		return nil
	})
	assertEvent(t, nsA, "WrongCluster", victimIP)
	time.Sleep(45 * time.Second) // replaceFailedMemberAfter, four times over
	if got := statusMemberIDs(t, a); !maps.Equal(got, idsA) {
		t.Fatalf("A's members changed on another cluster's answers: %v -> %v", idsA, got)
	}
	if got := statusMemberIDs(t, b); !maps.Equal(got, idsB) {
		t.Fatalf("B's members changed: %v -> %v", idsB, got)
	}
	for _, m := range env.Get(t, a).Status.Members {
		if m.UnhealthySince != nil || m.Diverged != nil {
			t.Fatalf("A's member %s judged on B's answers: %+v", m.Name, m)
		}
	}
	if logs := opA.Logs(); strings.Contains(logs, `"action":"RemoveMember"`) || strings.Contains(logs, `"action":"AddLearner"`) {
		t.Fatalf("A's operator changed A's membership: %s", logs)
	}

	restore()
	opA.Stop()
	env.StartOperatorInGroup(t, nsA, identityGID)
	env.WaitConverged(t, a, 3, convergeTimeout)
	framework.WaitFor(t, "A no longer Degraded", 2*time.Minute, func() error {
		if cond := meta.FindStatusCondition(env.Get(t, a).Status.Conditions, etcdv1alpha1.ConditionDegraded); cond != nil && cond.Status == metav1.ConditionTrue {
			return fmt.Errorf("Degraded %s: %s", cond.Reason, cond.Message)
		}
		return nil
	})
	if got := statusMemberIDs(t, a); !maps.Equal(got, idsA) {
		t.Fatalf("A's members changed: %v -> %v", idsA, got)
	}
}

// One byte of the newest backup's stored snapshot is flipped in the bucket after it was taken (bit
// rot, a bad copy). Quorum is then lost for good, and the FromBackup recovery chooses that newest
// backup: the restore refuses its bytes (SHA-256), the operator marks it corrupt (Verified=False
// BackupCorrupt), switches the recovery to the previous good backup, says so in an event, and the
// cluster comes back with the good backup's keys.
func TestRecoveryPassesOverAFlippedBackup(t *testing.T) {
	framework.Parallel(t, 55*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-flipped-")
	op := env.StartOperator(t, ns, "")
	mio := env.DeployMinIO(t, ns, bucket)
	c := fromBackupCluster(t, ns)
	cl := env.EtcdClient(t, c)
	good := framework.PutKeys(t, cl, "good/", 200)
	older := waitBackup(t, createBackup(t, ns, "older", c.Name, mio.Destination(bucket, "flip")), etcdv1alpha1.BackupSucceeded, 3*time.Minute)
	framework.PutKeys(t, cl, "late/", 200)
	newest := waitBackup(t, createBackup(t, ns, "newest", c.Name, mio.Destination(bucket, "flip")), etcdv1alpha1.BackupSucceeded, 3*time.Minute)
	flipByte(t, mio, newest)

	names := memberNames(env.Get(t, c))
	op.Stop() // both volumes at once, as TestQuorumLossManualWaitsForTheAnnotation explains
	loseMembers(t, ns, names[1:]...)
	env.StartOperator(t, ns, "")
	waitRecovered(t, c, "the cluster rebuilt from the previous good backup")
	env.WaitConverged(t, c, 3, convergeTimeout)
	if r := env.Get(t, c).Status.Recovery; r.Backup != older.Name {
		t.Fatalf("recovered from %q, want %s: %+v", r.Backup, older.Name, r)
	}
	assertEvent(t, ns, "BackupCorrupt", "the restore refused backup newest")
	b := &etcdv1alpha1.EtcdBackup{}
	if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(newest), b); err != nil {
		t.Fatal(err)
	}
	if corrupt, why := b.Corrupt(); !corrupt {
		t.Fatalf("the flipped backup is not marked corrupt: %+v", b.Status.Conditions)
	} else {
		t.Logf("the flipped backup: %s", why)
	}
	cl = env.EtcdClient(t, c)
	framework.CheckKeys(t, cl, "good/", good)
	if r, err := cl.Get(ctx, "late/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
		t.Fatalf("keys written after the good backup: %v %v (the recovery restored the flipped one?)", r, err)
	}
}

// flipByte changes one byte in the middle of b's snapshot object in the bucket.
func flipByte(t *testing.T, mio *framework.MinIO, b *etcdv1alpha1.EtcdBackup) {
	t.Helper()
	ctx := context.Background()
	key := b.Status.Location
	if i := strings.Index(key, bucket+"/"); i >= 0 {
		key = key[i+len(bucket)+1:]
	}
	obj, err := mio.Client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	if err != nil || len(data) == 0 {
		t.Fatalf("read %s: %d bytes, %v", key, len(data), err)
	}
	data[len(data)/2] ^= 0x01
	if _, err := mio.Client.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// One byte of a backup is flipped in the bucket after its own test-restore verified it: the next
// test-restore of the schedule (of the next backup) checks the other backups' bytes too, and marks it
// corrupt: found within one verification cycle.
func TestAVerificationCycleFindsAFlippedBackup(t *testing.T) {
	framework.Parallel(t, 195*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-recheck-")
	env.StartOperator(t, ns, "")
	mio := env.DeployMinIO(t, ns, bucket)
	c := createWith(t, ns, func(*etcdv1alpha1.EtcdCluster) {})
	framework.PutKeys(t, env.EtcdClient(t, c), "bk/", 100)
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "minutely", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "* * * * *", KeepLast: 3, Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: mio.Destination(bucket, "recheck")},
		Verify: &etcdv1alpha1.VerifySpec{Schedule: "* * * * *"},
	}}
	if err := env.K8s.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}
	verdict := func(b *etcdv1alpha1.EtcdBackup) *metav1.Condition {
		return meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.BackupConditionVerified)
	}
	var first *etcdv1alpha1.EtcdBackup
	framework.WaitFor(t, "a backup verified by its own test-restore", 5*time.Minute, func() error {
		list := &etcdv1alpha1.EtcdBackupList{}
		if err := env.K8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range list.Items {
			if cond := verdict(&list.Items[i]); cond != nil && cond.Status == metav1.ConditionTrue {
				first = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("%d backups, none verified", len(list.Items))
	})
	flipByte(t, mio, first)
	flipped := time.Now()
	framework.WaitFor(t, first.Name+" found changed by a later test-restore", 4*time.Minute, func() error {
		cur := &etcdv1alpha1.EtcdBackup{}
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(first), cur); err != nil {
			return err
		}
		if cond := verdict(cur); cond == nil || cond.Reason != "BackupCorrupt" || !strings.Contains(cond.Message, "rechecked by the test-restore") {
			return fmt.Errorf("Verified = %+v", cond)
		}
		return nil
	})
	t.Logf("%s, verified, then one byte flipped: marked corrupt %s later (verify schedule: every minute)", first.Name, time.Since(flipped).Round(time.Second))
}
