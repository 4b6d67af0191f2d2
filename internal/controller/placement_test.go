package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// A member pod's spread over nodes is a rule while its volume is new and a preference once the claim is
// bound (a local volume holds the pod to its node): a pod re-created on a bound claim must not be left
// Pending because its volume's node already runs another member.
func TestMemberPodsSpreadByNodeUnlessTheirVolumeIsPlaced(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, nil)
	byNode := func(name string) (corev1.UnsatisfiableConstraintAction, error) {
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return "", err
		}
		for _, tsc := range pod.Spec.TopologySpreadConstraints {
			if tsc.TopologyKey == corev1.LabelHostname {
				return tsc.WhenUnsatisfiable, nil
			}
		}
		return "", fmt.Errorf("pod %s has no spread over nodes: %+v", name, pod.Spec.TopologySpreadConstraints)
	}
	eventually(t, "3 member pods, spread by node as a rule", func() error {
		for _, m := range []string{"demo-0", "demo-1", "demo-2"} {
			if when, err := byNode(m); err != nil || when != corev1.DoNotSchedule {
				return fmt.Errorf("%s: %s %w", m, when, err)
			}
		}
		return nil
	})
	// demo-1's claim is bound (as the PV controller binds it), then its pod is lost.
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-1"}, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.VolumeName = "pv-on-node-a"
	if err := k8s.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	old := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-1"}, old); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	eventually(t, "demo-1 re-created, spread by node as a preference", func() error {
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-1"}, pod); err != nil {
			return err
		}
		if pod.UID == old.UID {
			return fmt.Errorf("not re-created yet")
		}
		if when, err := byNode("demo-1"); err != nil || when != corev1.ScheduleAnyway {
			return fmt.Errorf("demo-1: %s %w", when, err)
		}
		return nil
	})
}

// Spread reports the nodes the scheduler chose: nothing while a member is unplaced, False naming the
// node two members share and that its loss takes the quorum.
func TestSpreadReportsMembersThatShareANode(t *testing.T) {
	ns := newNamespace(t)
	c := newCluster(t, ns, nil)
	bind(t, ns, "demo-0", "node-a")
	bind(t, ns, "demo-1", "node-b")
	time.Sleep(2 * time.Second) // passes run on the bindings; demo-2 is still unplaced
	if cond := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread); cond != nil {
		t.Fatalf("Spread %s (%s) while demo-2 has no node yet; want no verdict", cond.Status, cond.Message)
	}
	bind(t, ns, "demo-2", "node-a")
	eventually(t, "Spread False, naming node-a", func() error {
		cond := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(reason.MembersShareANode) ||
			!strings.Contains(cond.Message, "demo-0 and demo-2 run on node node-a") || !strings.Contains(cond.Message, "no quorum") {
			return fmt.Errorf("Spread = %+v", cond)
		}
		return nil
	})
}

// TestSpreadReportsMembersThatShareAZone: with the members' nodes in zones, two members in zone a while
// zone b has a Ready node open to them is Spread False (MembersShareAZone) with a Warning event; once
// zone b's only node is cordoned, a, a, c is as spread as the open zones allow: True again.
func TestSpreadReportsMembersThatShareAZone(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	c := newCluster(t, ns, nil)
	node := func(name, zone string) *corev1.Node {
		t.Helper()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
		// The API server taints a new node not-ready (TaintNodesByCondition); the node lifecycle
		// controller, which envtest does not run, lifts it once the node is Ready.
		n.Spec.Taints = nil
		if err := k8s.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if err := k8s.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a1, a2, b1, c1 := node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")
	for pod, n := range map[string]*corev1.Node{"demo-0": a1, "demo-1": a2, "demo-2": c1} {
		bind(t, ns, pod, n.Name)
	}
	eventually(t, "Spread False, naming zone a", func() error {
		cond := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(reason.MembersShareAZone) ||
			!strings.Contains(cond.Message, "demo-0 and demo-1 run in zone a") || !strings.Contains(cond.Message, "zone b holds 0") {
			return fmt.Errorf("Spread = %+v", cond)
		}
		return nil
	})
	waitWarningEvent(t, ns, c.Name, reason.MembersShareAZone, "demo-0 and demo-1 run in zone a")
	b1.Spec.Unschedulable = true
	if err := k8s.Update(ctx, b1); err != nil {
		t.Fatal(err)
	}
	poke(t, c)
	eventually(t, "Spread True once zone b has no open node", func() error {
		cond := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "zones a, c") {
			return fmt.Errorf("Spread = %+v", cond)
		}
		return nil
	})
}

// bind places pod on node as the scheduler would (the binding subresource), once the pod exists.
func bind(t *testing.T, ns, pod, node string) {
	t.Helper()
	eventually(t, "bind "+pod, func() error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
		return k8s.SubResource("binding").Create(context.Background(), p, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}})
	})
}
