//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

func evict(ns, pod string) error {
	pdbWait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return env.K8s.SubResource("eviction").Create(pdbWait, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}},
		&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}})
}

// Issue 14 item 7. A drain evicts member pods through the eviction API: the disruption budget lets
// one go (the leader, which hands leadership over as it stops), refuses the next until the evicted
// member serves again on its volume, then lets the next go. No acknowledged write is lost.
func TestDrainEvictsOneMemberAtATime(t *testing.T) {
	framework.Parallel(t, 20*time.Second)
	ns := env.NewNamespace(t, "e2e-drain-")
	env.StartOperator(t, ns, "")
	c := createWith(t, ns, func(*etcdv1alpha1.EtcdCluster) {})
	cl := env.EtcdClient(t, c)
	stop := framework.FollowPods(cl, func() ([]string, error) { return env.CurrentEndpoints(c) })
	w := framework.StartWriter(cl, "/drain/")

	var leader, follower string
	for _, m := range env.Get(t, c).Status.Members {
		switch m.Role {
		case etcdv1alpha1.RoleLeader:
			leader = m.Name
		case etcdv1alpha1.RoleFollower:
			follower = m.Name
		}
	}
	// The budget's status follows the pods a moment later than the cluster converging.
	framework.WaitFor(t, "the budget allows one eviction", time.Minute, func() error { return evict(ns, leader) })
	err := evict(ns, follower)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("a second eviction while %s is away: %v, want it refused by the budget (429)", leader, err)
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	framework.WaitFor(t, "the next eviction allowed once the member is back", 2*time.Minute, func() error {
		if err := evict(ns, follower); err != nil {
			return fmt.Errorf("evict %s: %w", follower, err)
		}
		return nil
	})
	env.WaitConverged(t, c, 3, convergeTimeout)
	acked, failed := env.StopWriter(t, w, stop, cl, c)
	t.Logf("two evictions (the leader first): writer %d acknowledged, %d failed attempts (retried)", len(acked), failed)
	framework.CheckWrites(t, cl, w)
}
