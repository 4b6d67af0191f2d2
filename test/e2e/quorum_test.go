//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// fromBackupCluster is a converged 3-member cluster in ns that recovers a lost quorum FromBackup, with
// volumes that hold a snapshot and the restored data side by side.
func fromBackupCluster(t *testing.T, ns string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	return createWith(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Maintenance.QuorumLoss = planner.FromBackup
		c.Spec.Storage.Size = resource.MustParse("512Mi")
	})
}

// waitRecovered waits until c's quorum-loss recovery is complete (what names it in the test's log).
func waitRecovered(t *testing.T, c *etcdv1alpha1.EtcdCluster, what string) {
	t.Helper()
	framework.WaitFor(t, what, convergeTimeout, func() error {
		r := env.Get(t, c).Status.Recovery
		if r == nil || r.Phase != etcdv1alpha1.RecoveryComplete {
			return fmt.Errorf("recovery %+v", r)
		}
		return nil
	})
}

// loseMembers deletes the PVCs and pods of members, the way a lost node with local volumes loses
// them, and waits until the volumes are gone.
func loseMembers(t *testing.T, ns string, members ...string) {
	t.Helper()
	ctx := context.Background()
	for _, m := range members {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}}
		if err := env.K8s.Delete(ctx, pvc); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}}
		if err := env.K8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	framework.WaitFor(t, fmt.Sprintf("volumes of %v gone", members), 2*time.Minute, func() error {
		for _, m := range members {
			if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: m}, &corev1.PersistentVolumeClaim{}); err == nil {
				return fmt.Errorf("PVC %s still there", m)
			}
		}
		return nil
	})
}

func secretData(t *testing.T, ns, name string) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

func memberNames(c *etcdv1alpha1.EtcdCluster) []string {
	var out []string
	for _, m := range c.Status.Members {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// Issue 14 item 1. Two of three members lose their volumes: quorum can never come back. The
// operator (policy FromSurvivor, the default) restarts the survivor as a one-member cluster and
// grows it back to three through learners. It dies right after recording the recovery and right
// after starting the survivor with --force-new-cluster; fresh operators finish the work. Every key
// acknowledged before the fault is there, and users' client Secret is the same.
func TestQuorumLossRecoversFromSurvivor(t *testing.T) {
	framework.Parallel(t, 55*time.Second)
	ns := env.NewNamespace(t, "e2e-quorum-")
	op := env.StartOperator(t, ns, "")
	c := createWith(t, ns, func(*etcdv1alpha1.EtcdCluster) {})
	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/quorum/", 2000)
	clientSecret := env.Get(t, c).Status.Endpoints.ClientSecret
	secretBefore := secretData(t, ns, clientSecret)
	names := memberNames(env.Get(t, c))
	survivor, lost := names[0], names[1:]

	op.Stop()
	loseMembers(t, ns, lost...)

	for _, fp := range []string{failpoint.AfterRecoveryStart, failpoint.AfterForceNewCluster} {
		crashing := env.StartOperator(t, ns, fp)
		if code := crashing.WaitExit(t, 3*time.Minute); code != failpoint.ExitCode {
			t.Fatalf("operator exit code %d at %s, want the failpoint's %d", code, fp, failpoint.ExitCode)
		}
	}
	r := env.Get(t, c).Status.Recovery
	if r == nil || r.Survivor != survivor || r.Source != planner.FromSurvivor || !slices.Equal(r.LostMembers, lost) {
		t.Fatalf("recorded recovery %+v, want from %s, %v lost", r, survivor, lost)
	}

	env.StartOperator(t, ns, "")
	env.WaitConverged(t, c, 3, convergeTimeout)
	got := env.Get(t, c)
	if r := got.Status.Recovery; r == nil || r.Phase != etcdv1alpha1.RecoveryComplete || r.CompletedAt == nil {
		t.Fatalf("recovery not recorded as complete: %+v", r)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionQuorumLost); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "Recovered" {
		t.Fatalf("QuorumLost condition %+v, want False/Recovered", cond)
	}
	now := memberNames(got)
	if !slices.Contains(now, survivor) || slices.Contains(now, lost[0]) || slices.Contains(now, lost[1]) {
		t.Fatalf("members after recovery %v: want %s and two new members", now, survivor)
	}
	env.RefreshEndpoints(t, cl, c)
	framework.CheckKeys(t, cl, "/quorum/", keys)
	if _, err := cl.Put(context.Background(), "/quorum/after", "x"); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if after := secretData(t, ns, clientSecret); !reflect.DeepEqual(secretBefore, after) {
		t.Fatal("the users' client Secret changed during the recovery")
	}
	// The QuorumLost event of the operator that died at the failpoint may not have left it.
	assertEvent(t, ns, "Recovered", "quorum is back: "+survivor)
}

// Policy Manual: the operator only reports, with the command to run, until a human annotates the
// cluster; then it recovers.
func TestQuorumLossManualWaitsForTheAnnotation(t *testing.T) {
	framework.Parallel(t, 95*time.Second)
	ns := env.NewNamespace(t, "e2e-quorum-manual-")
	op := env.StartOperator(t, ns, "")
	c := createWith(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.QuorumLoss = planner.Manual })
	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/manual/", 500)
	names := memberNames(env.Get(t, c))
	ctx := context.Background()
	// Both volumes go while the operator is away: one at a time under its eyes, it would replace the
	// first while the other two still hold quorum (TestLostVolumeIsReplacedByANewMember).
	op.Stop()
	loseMembers(t, ns, names[1:]...)
	env.StartOperator(t, ns, "")
	framework.WaitFor(t, "QuorumLost reported with the next step", 2*time.Minute, func() error {
		cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionQuorumLost)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "QuorumLost" {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
	time.Sleep(15 * time.Second)
	if r := env.Get(t, c).Status.Recovery; r != nil {
		t.Fatalf("a Manual cluster started a recovery on its own: %+v", r)
	}
	assertEvent(t, ns, "QuorumLost", planner.RecoverAnnotation+"="+planner.FromSurvivor)

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, planner.RecoverAnnotation, planner.FromSurvivor)
	if err := env.K8s.Patch(ctx, env.Get(t, c), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	got := env.Get(t, c)
	if _, still := got.Annotations[planner.RecoverAnnotation]; still {
		t.Fatal("the recovery request annotation was left on the cluster")
	}
	if r := got.Status.Recovery; r == nil || r.Survivor != names[0] || r.Phase != etcdv1alpha1.RecoveryComplete {
		t.Fatalf("recovery %+v, want a completed one from %s", r, names[0])
	}
	env.RefreshEndpoints(t, cl, c)
	framework.CheckKeys(t, cl, "/manual/", keys)
}

// Policy FromBackup: with two of three volumes gone, the cluster is rebuilt under new member names
// from its newest successful backup; keys written after the backup are gone (the documented risk),
// every key in the backup is back.
//
// Under a live kube-apiserver (Kubernetes on this etcd) with an informer of its ConfigMaps: the
// restore takes the data back to the backup, so the informer, which saw the changes made after it,
// must drop them. It can only if its watch breaks: revisions after the restore are raised past the
// old cluster's and everything before is compacted, so the kube-apiserver's watch of etcd fails as
// compacted, it re-lists, its clients' watches expire and they re-list too. Without the raise its
// watch would wait, silently, for revision numbers the restored cluster reuses.
func TestQuorumLossRecoversFromBackup(t *testing.T) {
	framework.Parallel(t, 60*time.Second)
	ns := env.NewNamespace(t, "e2e-quorum-backup-")
	op := env.StartOperator(t, ns, "")
	mio := env.DeployMinIO(t, ns, bucket)
	c := fromBackupCluster(t, ns)
	cl := env.EtcdClient(t, c)
	kube := startKubeWatch(t, c)
	inBackup := map[string]string{}
	for i := range 10 {
		name := fmt.Sprintf("before-%d", i)
		kube.put(t, name, "v0")
		inBackup[name] = "v0"
	}
	kube.waitHolds(t, "the informer holds the objects written before the backup", inBackup, time.Minute)
	keys := framework.PutKeys(t, cl, "bk/", 1000)
	b := waitBackup(t, createBackup(t, ns, "before-loss", c.Name, mio.Destination(bucket, "quorum")), etcdv1alpha1.BackupSucceeded, 3*time.Minute)
	afterBackup := maps.Clone(inBackup)
	for i := range 3 {
		name := fmt.Sprintf("after-%d", i)
		kube.put(t, name, "v0")
		afterBackup[name] = "v0"
		kube.put(t, fmt.Sprintf("before-%d", i), "v1")
		afterBackup[fmt.Sprintf("before-%d", i)] = "v1"
		kube.delete(t, fmt.Sprintf("before-%d", 9-i))
		delete(afterBackup, fmt.Sprintf("before-%d", 9-i))
	}
	kube.waitHolds(t, "the informer holds the changes made after the backup", afterBackup, time.Minute)
	names := memberNames(env.Get(t, c))

	op.Stop() // both volumes at once, as TestQuorumLossManualWaitsForTheAnnotation explains
	loseMembers(t, ns, names[1:]...)
	env.StartOperator(t, ns, "")
	waitRecovered(t, c, "the cluster rebuilt from the backup")
	env.WaitConverged(t, c, 3, convergeTimeout)
	got := env.Get(t, c)
	if r := got.Status.Recovery; r.Source != planner.FromBackup || r.Backup != b.Name {
		t.Fatalf("recovery %+v, want from EtcdBackup %s", r, b.Name)
	}
	for _, n := range memberNames(got) {
		if slices.Contains(names, n) {
			t.Fatalf("member name %s reused after the rebuild: %v", n, memberNames(got))
		}
	}
	cl = env.EtcdClient(t, c)
	framework.CheckKeys(t, cl, "bk/", keys)
	kube.waitHolds(t, "the informer re-listed the restored objects (the backup's)", inBackup, 3*time.Minute)
	kube.put(t, "after-restore", "v0")
	inBackup["after-restore"] = "v0"
	kube.waitHolds(t, "the informer follows a write after the restore", inBackup, time.Minute)
}
