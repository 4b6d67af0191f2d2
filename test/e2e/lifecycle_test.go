//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
)

const convergeTimeout = 4 * time.Minute

// Create 3 → write 10k keys → delete a pod → it comes back as the same member; nothing lost.
func TestCreateWriteAndPodFailover(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, "")
	c := createCluster(t, ns, 3)
	waitConverged(t, c, 3, convergeTimeout)

	cl := etcdClient(t, c)
	keys := putKeys(t, cl, "/failover/", 10000)
	before := getCluster(t, c).Status

	victim := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: before.Members[1].Name}, victim); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod recreated", time.Minute, func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(victim), p); err != nil {
			return err
		}
		if p.UID == victim.UID {
			return fmt.Errorf("old pod still there")
		}
		return nil
	})
	waitConverged(t, c, 3, convergeTimeout)
	after := getCluster(t, c).Status
	for i := range before.Members {
		if before.Members[i].Name != after.Members[i].Name || before.Members[i].ID != after.Members[i].ID {
			t.Fatalf("membership changed: %+v -> %+v", before.Members, after.Members)
		}
	}
	refreshEndpoints(t, cl, c)
	checkKeys(t, cl, "/failover/", keys)
}

// Scale 3 → 5 → 3 while a client writes: every acknowledged write survives.
func TestScaleUnderWrites(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, "")
	c := createCluster(t, ns, 3)
	waitConverged(t, c, 3, convergeTimeout)
	cl := etcdClient(t, c)
	w := startWriter(cl, "/scale/")

	setReplicas(t, c, 5)
	waitConverged(t, c, 5, convergeTimeout)
	refreshEndpoints(t, cl, c)
	setReplicas(t, c, 3)
	waitConverged(t, c, 3, convergeTimeout)
	refreshEndpoints(t, cl, c)
	time.Sleep(2 * time.Second)
	acked, failed := w.finish()
	t.Logf("writer: %d acknowledged, %d failed (retried later) during 3→5→3", len(acked), failed)
	if len(acked) < 100 {
		t.Fatalf("the writer barely wrote (%d keys): the cluster was unavailable", len(acked))
	}
	checkKeys(t, cl, "/scale/", acked)
	names := []string{}
	for _, m := range getCluster(t, c).Status.Members {
		names = append(names, m.Name)
	}
	t.Logf("members after 3→5→3: %v", names)
}

// Deleting a member's PVC and pod loses its data: the member is replaced under a new name.
func TestLostVolumeIsReplacedByANewMember(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, "")
	c := createCluster(t, ns, 3)
	waitConverged(t, c, 3, convergeTimeout)
	cl := etcdClient(t, c)
	keys := putKeys(t, cl, "/replace/", 1000)

	victim := getCluster(t, c).Status.Members[2].Name
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, pvc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &corev1.Pod{ObjectMeta: pvc.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replacement member", convergeTimeout, func() error {
		for _, m := range getCluster(t, c).Status.Members {
			if m.Name == victim {
				return fmt.Errorf("%s still a member", victim)
			}
		}
		return nil
	})
	waitConverged(t, c, 3, convergeTimeout)
	refreshEndpoints(t, cl, c)
	checkKeys(t, cl, "/replace/", keys)
}

// With the operator stopped, etcd keeps serving; a restarted operator adopts the cluster without
// restarting any member.
func TestOperatorDownEtcdServesAndRestartAdopts(t *testing.T) {
	ns := newNamespace(t)
	op := startOperator(t, ns, "")
	c := createCluster(t, ns, 3)
	waitConverged(t, c, 3, convergeTimeout)
	uids := memberPodUIDs(t, c)
	op.stop()

	cl := etcdClient(t, c)
	keys := putKeys(t, cl, "/down/", 500)
	checkKeys(t, cl, "/down/", keys)

	startOperator(t, ns, "")
	time.Sleep(10 * time.Second)
	waitConverged(t, c, 3, time.Minute)
	after := memberPodUIDs(t, c)
	for name, uid := range uids {
		if after[name] != uid {
			t.Fatalf("pod %s was restarted by the new operator", name)
		}
	}

	// Steady state costs no API writes: the object is unchanged across more than one idle re-check.
	rv := getCluster(t, c).ResourceVersion
	time.Sleep(35 * time.Second)
	if now := getCluster(t, c); now.ResourceVersion != rv {
		t.Fatalf("an idle cluster was rewritten (resourceVersion %s -> %s): %+v", rv, now.ResourceVersion, now.Status)
	}
}

// The operator dies right after each irreversible step; a fresh operator finishes the work and the
// data is intact.
func TestCrashAtEveryFailpointConverges(t *testing.T) {
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
			ns := newNamespace(t)
			op := startOperator(t, ns, "")
			c := createCluster(t, ns, tc.from)
			waitConverged(t, c, tc.from, convergeTimeout)
			cl := etcdClient(t, c)
			keys := putKeys(t, cl, "/crash/", 1000)
			op.stop()

			crashing := startOperator(t, ns, tc.failpoint)
			setReplicas(t, c, tc.to)
			if code := crashing.waitExit(t, 2*time.Minute); code != failpoint.ExitCode {
				t.Fatalf("operator exit code %d, want the failpoint's %d", code, failpoint.ExitCode)
			}
			startOperator(t, ns, "")
			waitConverged(t, c, tc.to, convergeTimeout)
			refreshEndpoints(t, cl, c)
			checkKeys(t, cl, "/crash/", keys)
		})
	}
}
