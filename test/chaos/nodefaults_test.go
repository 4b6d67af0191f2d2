//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// Node faults need the local cluster with several nodes (make cluster-up NODES=4): each hits the
// node of a member, never the first node (hack/cluster/node.sh does not switch it off).

// memberNode is the node of a member (leader or follower, at random) that node.sh can switch.
func (r *run) memberNode() (string, error) {
	roles := []etcdv1alpha1.MemberRole{etcdv1alpha1.RoleFollower, etcdv1alpha1.RoleLeader}
	if r.rng.IntN(2) == 0 {
		roles[0], roles[1] = roles[1], roles[0]
	}
	for _, role := range roles {
		for range 5 {
			p, err := r.member(role)
			if err != nil {
				continue
			}
			if _, ok := framework.NodeIndex(p.Spec.NodeName); ok {
				r.t.Logf("  %s %s runs on node %s", role, p.Name, p.Spec.NodeName)
				return p.Spec.NodeName, nil
			}
		}
	}
	return "", fmt.Errorf("no member on a node other than the first (the node faults need make cluster-up NODES=4)")
}

// nodePowerOff stops every process of a member's node at once for hold, then powers it on: the
// member's volume is on that node, so it comes back with it.
func nodePowerOff(r *run) (int32, error) {
	node, err := r.memberNode()
	if err != nil {
		return 0, err
	}
	return r.nodeDown(node, "poweroff", "poweron")
}

// nodePartition cuts a member's node's pods off the network for hold: the kubelet still reports
// the node Ready, but no packet reaches its pods.
func nodePartition(r *run) (int32, error) {
	node, err := r.memberNode()
	if err != nil {
		return 0, err
	}
	return r.nodeDown(node, "netdown", "netup")
}

func (r *run) nodeDown(node, verb, heal string) (int32, error) {
	if err := env.NodeFault(verb, node); err != nil {
		return 0, err
	}
	healed := false
	undo := func() error {
		if healed {
			return nil
		}
		healed = true
		return env.NodeFault(heal, node)
	}
	r.t.Cleanup(func() { _ = undo() })
	r.t.Logf("  node %s: %s for %s", node, verb, hold)
	time.Sleep(hold)
	return r.replicas, undo()
}

// nodeDrain drains a member's node as a node pool upgrade does (evictions, which the cluster's
// PodDisruptionBudget gates), holds, and lets the node take pods again: a member whose volume is on
// that node waits for it (the default node-maintenance policy).
func nodeDrain(r *run) (int32, error) {
	node, err := r.memberNode()
	if err != nil {
		return 0, err
	}
	uncordon := func() error { return kubectl("uncordon", node) }
	r.t.Cleanup(func() { _ = uncordon() })
	r.t.Logf("  draining node %s for %s", node, hold)
	if err := kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s", "--pod-selector=app.kubernetes.io/name=etcd"); err != nil {
		return 0, err
	}
	time.Sleep(hold)
	return r.replicas, uncordon()
}

// nodeDeleted powers a member's node off and deletes its Node object, as when a cloud removes a
// dead machine; the machine then comes back under the same name (the kubelet registers it again),
// so the cluster can converge at its size.
func nodeDeleted(r *run) (int32, error) {
	node, err := r.memberNode()
	if err != nil {
		return 0, err
	}
	if err := env.NodeFault("poweroff", node); err != nil {
		return 0, err
	}
	on := func() error { return env.NodeFault("poweron", node) }
	r.t.Cleanup(func() { _ = on() })
	obj := &corev1.Node{}
	obj.Name = node
	if err := env.K8s.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
		return 0, fmt.Errorf("delete node %s: %w", node, err)
	}
	r.t.Logf("  node %s powered off and deleted; back in %s", node, hold)
	time.Sleep(hold)
	return r.replicas, on()
}

func kubectl(args ...string) error {
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return nil
}
