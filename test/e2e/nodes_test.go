//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// The node-fault suite needs the local cluster with several nodes (make cluster-up NODES=4,
// docs/dev/local-cluster.md); on fewer nodes its tests skip.
const nodeFaultNodes = 4

// readyNodes are the names of the cluster's Ready nodes.
func readyNodes(t *testing.T) []string {
	t.Helper()
	list := &corev1.NodeList{}
	if err := env.K8s.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var ready []string
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	return ready
}

// needNodes skips the test on a cluster with fewer Ready nodes than the node-fault suite needs.
func needNodes(t *testing.T) []string {
	t.Helper()
	nodes := readyNodes(t)
	if len(nodes) < nodeFaultNodes {
		t.Skipf("needs %d Ready nodes (make cluster-up NODES=%d); the cluster has %d", nodeFaultNodes, nodeFaultNodes, len(nodes))
	}
	return nodes
}

// nodeFault runs hack/cluster/node.sh on the node named name (NODE_NAME-K) of the cluster whose
// kubeconfig the suite uses.
func nodeFault(t *testing.T, verb, name string) {
	t.Helper()
	i := strings.LastIndex(name, "-")
	if i < 0 {
		t.Fatalf("node %s is the first node, which node.sh does not switch off", name)
	}
	state := filepath.Dir(os.Getenv("KUBECONFIG"))
	out, err := exec.Command(filepath.Join("..", "..", "hack", "cluster", "node.sh"), verb, name[i+1:], state).CombinedOutput()
	if err != nil {
		t.Fatalf("node.sh %s %s: %v\n%s", verb, name, err, out)
	}
}

// memberNodes maps each member pod of c to the node it runs on.
func memberNodes(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// TestNodePowerOffWithLocalVolume: a follower's node loses power, with the member's data on a
// node-local volume (local-path). etcd reports the member failing; after
// spec.maintenance.replaceFailedMemberAfter the operator must bring the cluster back to three healthy
// voters, one of them on another node, without losing an acknowledged write; when the node comes
// back, its old member must not rejoin.
func TestNodePowerOffWithLocalVolume(t *testing.T) {
	needNodes(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-node-")
	env.StartOperator(t, ns, "")
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	c.Spec.Replicas = 3
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	c.Spec.Maintenance.ReplaceFailedMemberAfter = "1m"
	if err := env.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	before := memberNodes(t, c)
	t.Logf("placement: %v", before)

	var victim, node string
	for _, m := range env.Get(t, c).Status.Members {
		if n := before[m.Name]; m.Role != etcdv1alpha1.RoleLeader && strings.Contains(n, "-") {
			victim, node = m.Name, n
			break
		}
	}
	if victim == "" {
		t.Skipf("every follower runs on the first node, which node.sh does not switch off: %v", before)
	}

	cl := env.EtcdClient(t, c)
	stopFollowing := framework.FollowPods(cl, func() ([]string, error) { return env.CurrentEndpoints(c) })
	w := framework.StartWriter(cl, "/node/")
	available, samples := 0, 0
	stopSampling := framework.Every(time.Second, func() {
		cur := &etcdv1alpha1.EtcdCluster{}
		if env.K8s.Get(ctx, client.ObjectKeyFromObject(c), cur) == nil {
			samples++
			if meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable) {
				available++
			}
		}
	})
	w.FaultBegins()
	start := time.Now()
	nodeFault(t, "poweroff", node)
	poweredOn := false
	t.Cleanup(func() {
		if !poweredOn {
			nodeFault(t, "poweron", node)
		}
	})

	framework.WaitFor(t, victim+" replaced by a member on another node", 1*time.Minute+8*time.Minute, func() error {
		if err := env.Converged(c, 3); err != nil {
			return err
		}
		now := memberNodes(t, c)
		for m, n := range now {
			if n == node {
				return fmt.Errorf("member %s still on the powered-off node %s (%v)", m, node, now)
			}
		}
		return nil
	})
	back := time.Since(start)
	stopSampling()
	t.Logf("back to 3 healthy voters, none on %s, %s after the power-off; Available in %d of %d samples; placement %v",
		node, back.Round(time.Second), available, samples, memberNodes(t, c))

	nodeFault(t, "poweron", node)
	poweredOn = true
	ids := map[string]bool{}
	for _, m := range env.Get(t, c).Status.Members {
		ids[m.ID] = true
	}
	time.Sleep(time.Minute) // the node's kubelet is back: whatever it restarts has had time to try
	resp, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if !ids[fmt.Sprintf("%x", m.ID)] {
			t.Errorf("member %s (%x) in the member list after %s came back: the old member rejoined", m.Name, m.ID, node)
		}
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	acked, failed := env.StopWriter(t, w, stopFollowing, cl, c)
	framework.CheckWrites(t, cl, w)
	t.Logf("writer: %d acknowledged, %d failed attempts", len(acked), failed)
}
