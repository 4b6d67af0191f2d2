package etcdcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A member the operator's own call cannot reach, while the leader still has a raft connection to it
// and its pod is Ready, is reported healthy (status, READY), though the planner still waits for its
// answer; once its etcd stops, the leader's view of its peers drops it and it is reported down. On
// three real embedded members: the follower's pod IP is moved to an address where nothing listens,
// as a call that times out on a loaded machine would leave the operator without its answer.
func TestAMemberOnlyTheOperatorCannotReachIsReportedHealthy(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := pausedPlainCluster(t, ns)
	pods, ms, cl := runningMembers(t, c, nil)
	r := &EtcdClusterReconciler{Client: k8s, Scheme: k8s.Scheme(), Recorder: record.NewFakeRecorder(100), apiReader: k8s}
	for _, pod := range pods {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	follower := followerOf(t, cl, ms)
	id := uint64(follower.Etcd.Server.MemberID())
	pod := pods[follower.Name]
	ip := pod.Status.PodIP
	pod.Status.PodIP = ip[:len(ip)-2] + "99" // nothing listens there

	// report runs a pass's observation and says what status and the planner make of the follower.
	report := func() (reported, planned bool, ready int32) {
		t.Helper()
		p, _ := decidePass(ctx, t, r, c, cl, pods, time.Now(), 3)
		n := p.recordMembers()
		for _, m := range etcdInput(p.obs).Members {
			if m.ID == id {
				planned = m.Healthy
			}
		}
		return reportedHealthy(p.obs, id), planned, n.servingVoters
	}
	operatortest.Eventually(t, follower.Name+" vouched for by the leader", func() error {
		if reported, planned, ready := report(); !reported || planned || ready != 3 {
			return fmt.Errorf("reported healthy %v, healthy to the planner %v, %d serving; want true, false, 3", reported, planned, ready)
		}
		return nil
	})

	pod.Status.Conditions = nil // the kubelet's /readyz probe fails: no longer vouched for
	if reported, _, ready := report(); reported || ready != 2 {
		t.Fatalf("pod not Ready: reported healthy %v, %d serving; want false, 2", reported, ready)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	follower.Stop()
	operatortest.Eventually(t, follower.Name+" reported down once the leader has no raft connection to it", func() error {
		if reported, _, ready := report(); reported || ready != 2 {
			return fmt.Errorf("reported healthy %v, %d serving; want false, 2", reported, ready)
		}
		return nil
	})
}
