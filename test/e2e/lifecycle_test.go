//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const convergeTimeout = 4 * time.Minute

// Create 3 → write 10k keys → delete a pod → it comes back as the same member; nothing lost.
func TestCreateWriteAndPodFailover(t *testing.T) {
	framework.Parallel(t, 15*time.Second)
	c := newCluster(t, "")

	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/failover/", 10000)
	before := env.Get(t, c).Status

	victim := &corev1.Pod{}
	if err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: before.Members[1].Name}, victim); err != nil {
		t.Fatal(err)
	}
	if err := env.K8s.Delete(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "pod recreated", time.Minute, func() error {
		p := &corev1.Pod{}
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(victim), p); err != nil {
			return err
		}
		if p.UID == victim.UID {
			return fmt.Errorf("old pod still there")
		}
		return nil
	})
	env.WaitConverged(t, c, 3, convergeTimeout)
	after := env.Get(t, c).Status
	for i := range before.Members {
		if before.Members[i].Name != after.Members[i].Name || before.Members[i].ID != after.Members[i].ID {
			t.Fatalf("membership changed: %+v -> %+v", before.Members, after.Members)
		}
	}
	env.RefreshEndpoints(t, cl, c)
	framework.CheckKeys(t, cl, "/failover/", keys)
}

// Scale 3 → 5 → 3 while a client writes: every acknowledged write survives.
func TestScaleUnderWrites(t *testing.T) {
	framework.Parallel(t, 50*time.Second)
	c := newCluster(t, "")
	cl := env.EtcdClient(t, c)
	w := framework.StartWriter(cl, "/scale/")

	env.SetReplicas(t, c, 5)
	env.WaitConverged(t, c, 5, convergeTimeout)
	env.RefreshEndpoints(t, cl, c)
	env.SetReplicas(t, c, 3)
	env.WaitConverged(t, c, 3, convergeTimeout)
	env.RefreshEndpoints(t, cl, c)
	time.Sleep(2 * time.Second)
	acked, failed := w.Finish()
	t.Logf("writer: %d acknowledged, %d failed (retried later) during 3→5→3", len(acked), failed)
	if len(acked) < 100 {
		t.Fatalf("the writer barely wrote (%d keys): the cluster was unavailable", len(acked))
	}
	framework.CheckWrites(t, cl, w)
	names := []string{}
	for _, m := range env.Get(t, c).Status.Members {
		names = append(names, m.Name)
	}
	t.Logf("members after 3→5→3: %v", names)
}

// Deleting a member's PVC and pod loses its data: the member is replaced under a new name. The
// victim is the leader, the harder case (the chaos suite loses followers): the operator acts while
// the leader's pod is still stopping and must let its etcd hand leadership over first.
func TestLostVolumeIsReplacedByANewMember(t *testing.T) {
	framework.Parallel(t, 15*time.Second)
	c := newCluster(t, "")
	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/replace/", 1000)

	var victim string
	framework.WaitFor(t, "a leader in the status", convergeTimeout, func() error {
		for _, m := range env.Get(t, c).Status.Members {
			if m.Role == etcdv1alpha1.RoleLeader {
				victim = m.Name
				return nil
			}
		}
		return errors.New("no member reported as leader")
	})
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: victim}, pvc); err != nil {
		t.Fatal(err)
	}
	if err := env.K8s.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := env.K8s.Delete(ctx, &corev1.Pod{ObjectMeta: pvc.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "replacement member", convergeTimeout, func() error {
		for _, m := range env.Get(t, c).Status.Members {
			if m.Name == victim {
				return fmt.Errorf("%s still a member", victim)
			}
		}
		return nil
	})
	env.WaitConverged(t, c, 3, convergeTimeout)
	env.RefreshEndpoints(t, cl, c)
	framework.CheckKeys(t, cl, "/replace/", keys)
}

// With the operator stopped, etcd keeps serving; a restarted operator adopts the cluster without
// restarting any member.
func TestOperatorDownEtcdServesAndRestartAdopts(t *testing.T) {
	framework.Parallel(t, 55*time.Second)
	ns := env.NewNamespace(t, "e2e-")
	op := env.StartOperator(t, ns, "")
	c := env.CreateCluster(t, ns, 3, "")
	env.WaitConverged(t, c, 3, convergeTimeout)
	uids := env.MemberPodUIDs(t, c)
	op.Stop()

	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/down/", 500)
	framework.CheckKeys(t, cl, "/down/", keys)

	env.StartOperator(t, ns, "")
	time.Sleep(10 * time.Second)
	env.WaitConverged(t, c, 3, time.Minute)
	after := env.MemberPodUIDs(t, c)
	for name, uid := range uids {
		if after[name] != uid {
			t.Fatalf("pod %s was restarted by the new operator", name)
		}
	}

	// Steady state costs no API writes: once the operator has recorded the members catching up
	// with the writes made while it was down, a whole idle re-check interval (30 s) passes without
	// the object being written. Within 2 minutes such a window must occur.
	quiet, rv, since := false, env.Get(t, c).ResourceVersion, time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		now := env.Get(t, c).ResourceVersion
		if now != rv {
			rv, since = now, time.Now()
			continue
		}
		if time.Since(since) > 35*time.Second {
			quiet = true
			break
		}
	}
	if !quiet {
		t.Fatalf("an idle cluster keeps being rewritten: %+v", env.Get(t, c).Status)
	}
}

// The operator dies right after each irreversible step; a fresh operator finishes the work and the
// data is intact.
func TestCrashAtEveryFailpointConverges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failpoint string
		from, to  int32
	}{
		{failpoint.AfterMemberAdd, 1, 3},
		{failpoint.AfterPodCreate, 1, 3},
		{failpoint.AfterPromote, 1, 3},
		{failpoint.AfterMemberRemove, 3, 1},
	} {
		t.Run(tc.failpoint, func(t *testing.T) {
			framework.Parallel(t, 35*time.Second)
			ns := env.NewNamespace(t, "e2e-")
			op := env.StartOperator(t, ns, "")
			c := env.CreateCluster(t, ns, tc.from, "")
			env.WaitConverged(t, c, tc.from, convergeTimeout)
			cl := env.EtcdClient(t, c)
			keys := framework.PutKeys(t, cl, "/crash/", 1000)
			op.Stop()

			crashing := env.StartOperator(t, ns, tc.failpoint)
			env.SetReplicas(t, c, tc.to)
			if code := crashing.WaitExit(t, 2*time.Minute); code != failpoint.ExitCode {
				t.Fatalf("operator exit code %d, want the failpoint's %d", code, failpoint.ExitCode)
			}
			env.StartOperator(t, ns, "")
			env.WaitConverged(t, c, tc.to, convergeTimeout)
			env.RefreshEndpoints(t, cl, c)
			framework.CheckKeys(t, cl, "/crash/", keys)
		})
	}
}
