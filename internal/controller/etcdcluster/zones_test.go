package etcdcluster

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

func TestZonesOf(t *testing.T) {
	readyAt := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	node := func(name, zone string, ready bool, edit func(*corev1.Node)) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if zone != "" {
			n.Labels[corev1.LabelTopologyZone] = zone
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(readyAt)}}
		if edit != nil {
			edit(&n)
		}
		return n
	}
	dedicated := corev1.Taint{Key: "dedicated", Value: "etcd", Effect: corev1.TaintEffectNoSchedule}
	nodes := []corev1.Node{
		node("a1", "a", true, nil),
		node("b1", "b", false, nil), // NotReady
		node("c1", "c", true, func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("d1", "d", true, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{dedicated} }),
		node("e1", "e", true, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
		}),
		node("f1", "f", true, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
		}),
		node("x1", "", true, nil), // no zone
		node("a2", "a", true, func(n *corev1.Node) {
			n.Status.Conditions[1].LastTransitionTime = metav1.NewTime(readyAt.Add(-time.Hour))
		}),
	}
	for _, tc := range []struct {
		name        string
		tolerations []corev1.Toleration
		open        string
	}{
		{name: "no tolerations", open: "[a e]"},
		{name: "the dedicated taint tolerated", tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}}, open: "[a d e]"},
		{name: "everything tolerated", tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, open: "[a d e f]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := zonesOf(nodes, tc.tolerations)
			if got := fmt.Sprint(z.Open); got != tc.open {
				t.Errorf("open zones %s, want %s", got, tc.open)
			}
			if len(z.Of) != 7 || z.Of["b1"] != "b" || z.Of["a2"] != "a" {
				t.Errorf("zone of each node %v, want every node with a zone label (7)", z.Of)
			}
			// Open since its first open node turned Ready: a2 before a1.
			if got, want := z.OpenSince["a"], readyAt.Add(-time.Hour); !got.Equal(want) || len(z.OpenSince) != len(z.Open) {
				t.Errorf("open since %v, want zone a since %s and one time per open zone", z.OpenSince, want)
			}
		})
	}
}

func TestSlimNodeKeepsWhatZonesOfReads(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "a1", Labels: map[string]string{corev1.LabelTopologyZone: "a", corev1.LabelHostname: "a1"}, Annotations: map[string]string{"big": "x"}},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}, PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is posting ready status", LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))}},
			Images:     []corev1.ContainerImage{{Names: []string{"etcd"}}},
		},
	}
	out, err := slimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Node)
	if len(slim.Labels) != 1 || slim.Annotations != nil || slim.Spec.PodCIDR != "" || slim.Status.Images != nil || len(slim.Status.Conditions) != 1 || slim.Status.Conditions[0].Message != "" {
		t.Errorf("slim node keeps more than the zone, cordon, taints and readiness: %+v", slim)
	}
	if got, want := zonesOf([]corev1.Node{*slim}, nil), zonesOf([]corev1.Node{*n}, nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("zones of the slim node %v, of the node %v", got, want)
	}
}

func TestCordonedMembersFollowTheirVolumesNode(t *testing.T) {
	pvc := func(node string) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{}
		if node != "" {
			p.Annotations = map[string]string{annSelectedNode: node}
		}
		return p
	}
	pod := func(node string) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}} }
	o := &observation{
		pvcs: map[string]*corev1.PersistentVolumeClaim{
			"m-0": pvc("n1"), // volume on the cordoned node, its new pod not placed yet
			"m-1": pvc(""),   // a network volume: the pod's node
			"m-2": pvc("n2"), // volume on an open node, even if its pod ran elsewhere
			"m-3": pvc(""),   // no pod, no node known
		},
		pods:     map[string]*corev1.Pod{"m-0": pod(""), "m-1": pod("n1"), "m-2": pod("n1")},
		cordoned: map[string]bool{"n1": true},
	}
	if got, want := fmt.Sprint(cordonedMembers(o)), "map[m-0:n1 m-1:n1]"; got != want {
		t.Errorf("cordoned members %s, want %s", got, want)
	}
}

// recordRebalance writes each step of a zone move ahead of its membership call: the zone of the learner
// (on its member entry, which its pod is built from) and the move; the end, with the zone cleared; the
// abandonment. A retried addition (resumed from the pending operation, without a zone) changes nothing.
func TestRecordRebalanceAheadOfEachCall(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{}
	c.Status.Members = []etcdv1alpha1.MemberStatus{{Name: "demo-0"}, {Name: "demo-1"}, {Name: "demo-3"}}
	recordRebalance(c, planner.Action{Kind: planner.AddLearner, Members: []string{"demo-3"}, Zone: "b", Reason: reason.RebalancingZones}, t0)
	if r := c.Status.ZoneRebalance; r == nil || r.Zone != "b" || r.Member != "demo-3" || !r.StartedAt.Time.Equal(t0) || memberZone(c, "demo-3") != "b" {
		t.Fatalf("after the addition: %+v, demo-3's zone %q", r, memberZone(c, "demo-3"))
	}
	recordRebalance(c, planner.Action{Kind: planner.AddLearner, Members: []string{"demo-3"}, Reason: reason.RebalancingZones}, t0.Add(time.Minute))
	if r := c.Status.ZoneRebalance; !r.StartedAt.Time.Equal(t0) || memberZone(c, "demo-3") != "b" {
		t.Fatalf("a retried addition changed the record: %+v", r)
	}
	recordRebalance(c, planner.Action{Kind: planner.RemoveMember, Members: []string{"demo-1"}, Reason: reason.ScalingDown}, t0.Add(2*time.Minute))
	if c.Status.ZoneRebalance.FinishedAt != nil {
		t.Fatal("a plain scale-down ended the move")
	}
	recordRebalance(c, planner.Action{Kind: planner.RemoveMember, Members: []string{"demo-1"}, Reason: reason.RebalancingZones}, t0.Add(3*time.Minute))
	if r := c.Status.ZoneRebalance; r.FinishedAt == nil || !r.FinishedAt.Time.Equal(t0.Add(3*time.Minute)) || memberZone(c, "demo-3") != "" || r.GaveUpAt != nil {
		t.Fatalf("after the crowded member's removal: %+v, demo-3's zone %q", r, memberZone(c, "demo-3"))
	}

	c.Status.ZoneRebalance = nil
	recordRebalance(c, planner.Action{Kind: planner.AddLearner, Members: []string{"demo-4"}, Zone: "b", Reason: reason.RebalancingZones}, t0)
	recordRebalance(c, planner.Action{Kind: planner.RemoveMember, Members: []string{"demo-4"}, Reason: reason.ZoneRebalanceAbandoned}, t0.Add(5*time.Minute))
	if r := c.Status.ZoneRebalance; r.GaveUpAt == nil || r.FinishedAt != nil {
		t.Fatalf("after the learner found no node: %+v", r)
	}
}
