package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A member pod's spread over nodes is a rule while its volume is new and a preference once the claim is
// bound (a local volume holds the pod to its node): a pod re-created on a bound claim must not be left
// Pending because its volume's node already runs another member.
func TestMemberPodsSpreadByNodeUnlessTheirVolumeIsPlaced(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	operatortest.NewCluster(t, ns, nil)
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
	operatortest.Eventually(t, "3 member pods, spread by node as a rule", func() error {
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
	operatortest.Eventually(t, "demo-1 re-created, spread by node as a preference", func() error {
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
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, nil)
	bind(t, ns, "demo-0", "node-a")
	bind(t, ns, "demo-1", "node-b")
	time.Sleep(2 * time.Second) // passes run on the bindings; demo-2 is still unplaced
	if cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread); cond != nil {
		t.Fatalf("Spread %s (%s) while demo-2 has no node yet; want no verdict", cond.Status, cond.Message)
	}
	bind(t, ns, "demo-2", "node-a")
	operatortest.Eventually(t, "Spread False, naming node-a", func() error {
		cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
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
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, nil)
	node := func(name, zone string) *corev1.Node { return readyNode(t, ns, name, zone, time.Now()) }
	a1, a2, b1, c1 := node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")
	for pod, n := range map[string]*corev1.Node{"demo-0": a1, "demo-1": a2, "demo-2": c1} {
		bind(t, ns, pod, n.Name)
	}
	operatortest.Eventually(t, "Spread False, naming zone a", func() error {
		cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
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
	operatortest.Poke(t, c)
	operatortest.Eventually(t, "Spread True once zone b has no open node", func() error {
		cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "zones a, c") {
			return fmt.Errorf("Spread = %+v", cond)
		}
		return nil
	})
}

// readyNode creates node ns-name in zone, Ready since readySince and open to pods; it is deleted
// after the test (nodes are not namespaced).
func readyNode(t *testing.T, ns, name, zone string, readySince time.Time) *corev1.Node {
	t.Helper()
	ctx := context.Background()
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
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readySince)}}
	if err := k8s.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// bind places pod on node as the scheduler would (the binding subresource), once the pod exists.
func bind(t *testing.T, ns, pod, node string) {
	t.Helper()
	operatortest.Eventually(t, "bind "+pod, func() error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
		return k8s.SubResource("binding").Create(context.Background(), p, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}})
	})
}

// Issue 31 item 6, on real etcd and real Node objects: zone b came back after an outage that left
// demo-0 and demo-1 in zone a. Nothing moves until zone b's node has been Ready for 2 minutes; then
// the operator adds learner demo-3 for zone b and dies right after etcd added it (failpoint
// AfterMemberAdd). The zone was recorded with the pending addition, so the next passes finish the
// addition and build demo-3's pod with a required node affinity for zone b. No node of zone b takes
// the pod (envtest schedules nothing): after 5 minutes the learner is removed, the move is recorded
// as given up, Spread says so, and no new move starts until the backoff is over.
// decidePass is one pass of a freshly started operator at now over the embedded members run as pods:
// the cluster as the API server has it, the nodes as they are, etcd as it answers, and the step the
// planner decides for spec.replicas = replicas.
func decidePass(ctx context.Context, t *testing.T, r *EtcdClusterReconciler, c *etcdv1alpha1.EtcdCluster, cl *etcdclient.Client,
	pods map[string]*corev1.Pod, now time.Time, replicas int32) (*pass, planner.Action) {
	t.Helper()
	cur := operatortest.Get(t, c)
	cur.Spec.Maintenance.Paused = false // as the pass sees it; the manager still leaves the object alone
	p := &pass{r: r, c: cur, orig: cur.DeepCopy(), now: now, mem: &clusterMemory{}}
	o := observeMembers(ctx, t, p, cl, pods)
	p.observeNodes(ctx, o)
	in := memberPlannerInput(p)
	in.Replicas = replicas
	in.Known, in.NextIndex, in.Pending, in.TargetVersion = knownMembers(cur), cur.Status.NextMemberIndex, pendingInput(cur), cur.Spec.Version
	in.Placement, in.Rebalance = placementInput(cur, o, 0), rebalanceInput(cur)
	for name, pod := range pods {
		ps := in.Pods[name]
		ps.Created, ps.UnscheduledSince = pod.CreationTimestamp.Time, unscheduledSince(pod)
		in.Pods[name] = ps
	}
	return p, planner.Decide(in)
}

func TestZoneRebalanceAddsALearnerThatMustRunInTheReturnedZone(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := pausedPlainCluster(t, ns)
	start := time.Now()
	nodes := map[string]*corev1.Node{
		"demo-0": readyNode(t, ns, "a1", "a", start.Add(-time.Hour)),
		"demo-1": readyNode(t, ns, "a2", "a", start.Add(-time.Hour)),
		"demo-2": readyNode(t, ns, "c1", "c", start.Add(-time.Hour)),
	}
	readyNode(t, ns, "b1", "b", start) // zone b is back

	nodeOf := map[string]string{}
	for m, n := range nodes {
		nodeOf[m] = n.Name
	}
	pods, _, cl := runningMembers(t, c, nodeOf)
	// The learner's pod is created on the client Service's IP family (the manager makes the Service
	// even for a paused cluster; whichever comes first).
	if err := k8s.Create(ctx, resources.ClientService(c)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	rec := record.NewFakeRecorder(100)
	r := &EtcdClusterReconciler{Client: k8s, Scheme: k8s.Scheme(), Recorder: rec, apiReader: k8s}
	replicas := int32(3) // spec.replicas as the passes see it
	round := func(now time.Time) (*pass, planner.Action) {
		t.Helper()
		return decidePass(ctx, t, r, c, cl, pods, now, replicas)
	}
	// step takes the step a pass at now decides, which must be of kind, and returns it. A failed step
	// (a stale view: the manager writes the paused cluster's status too; etcd's not yet; a member
	// answering its own removal with "server stopped") is tried again, as the operator does, then
	// also as the step that finishes it (then), should the etcd call have gone through.
	step := func(now time.Time, kind, then planner.Kind) planner.Action {
		t.Helper()
		var first planner.Action
		for range 20 {
			p, a := round(now)
			if a.Kind != kind && (first.Kind == "" || a.Kind != then) {
				t.Fatalf("%s %v (%s: %s), want %s", a.Kind, a.Members, a.Reason, a.Message, kind)
			}
			if first.Kind == "" {
				first = a
			}
			err := p.act(ctx, a)
			if err == nil {
				return first
			}
			t.Logf("%s %v: %v (tried again)", a.Kind, a.Members, err)
			time.Sleep(time.Second)
		}
		t.Fatalf("%s not taken in 20 tries", kind)
		return planner.Action{}
	}

	if _, a := round(start.Add(time.Minute)); a.Kind != planner.None {
		t.Fatalf("zone b Ready for a minute: %s %v (%s), want nothing yet", a.Kind, a.Members, a.Message)
	}
	p, a := round(start.Add(planner.DefaultZoneSettle))
	if a.Kind != planner.AddLearner || a.Zone != "b" || a.Reason != reason.RebalancingZones || a.Members[0] != "demo-3" {
		t.Fatalf("zone b Ready for 2 minutes: %s %v zone %q (%s: %s), want learner demo-3 for zone b", a.Kind, a.Members, a.Zone, a.Reason, a.Message)
	}
	disarm := failpoint.ArmPanicking(failpoint.AfterMemberAdd)
	// etcd refuses an addition until its members have been connected for its health interval.
	err := actCrashing(ctx, p, a)
	for ; errors.As(err, new(notYet)) || apierrors.IsConflict(err); err = actCrashing(ctx, p, a) {
		time.Sleep(time.Second)
		p, _ = round(start.Add(planner.DefaultZoneSettle)) // the same addition, on a fresh view
	}
	disarm()
	if !errors.As(err, new(failpoint.Crash)) {
		t.Fatalf("the operator did not die after the addition: %v", err)
	}
	got := operatortest.Get(t, c)
	if pd := got.Status.PendingOperation; pd == nil || pd.Type != "AddMember" || pd.Member != "demo-3" || memberZone(got, "demo-3") != "b" {
		t.Fatalf("after the crash: pending %+v, members %+v; want the addition of demo-3 for zone b recorded", pd, got.Status.Members)
	}
	if zr := got.Status.ZoneRebalance; zr == nil || zr.Zone != "b" || zr.Member != "demo-3" {
		t.Fatalf("zoneRebalance %+v, want demo-3 into zone b", zr)
	}

	step(start.Add(planner.DefaultZoneSettle), planner.FinishAdd, planner.FinishAdd) // after the restart: the recorded addition
	if a := step(start.Add(planner.DefaultZoneSettle), planner.CreateMembers, planner.CreateMembers); a.Members[0] != "demo-3" {
		t.Fatalf("created %v, want demo-3's pod", a.Members)
	}
	learner := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-3"}, learner); err != nil {
		t.Fatal(err)
	}
	var required []corev1.NodeSelectorTerm
	if aff := learner.Spec.Affinity; aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		required = aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	// The zone first, then the architecture every member pod requires (internal/resources).
	if len(required) != 1 || len(required[0].MatchExpressions) != 2 || fmt.Sprint(required[0].MatchExpressions[0]) != fmt.Sprintf("{%s In [b]}", corev1.LabelTopologyZone) {
		t.Fatalf("demo-3's pod: required node affinity %+v, want zone b and the architecture", required)
	}

	// Nothing schedules it: once it has waited RebalanceScheduleTimeout, the learner goes.
	pods["demo-3"] = learner
	if _, a := round(learner.CreationTimestamp.Add(time.Minute)); a.Kind != planner.Wait {
		t.Fatalf("learner unscheduled for a minute: %s %v (%s), want a wait", a.Kind, a.Members, a.Message)
	}
	if a := step(learner.CreationTimestamp.Add(planner.RebalanceScheduleTimeout), planner.RemoveMember, planner.FinishRemove); a.Members[0] != "demo-3" || a.Reason != reason.ZoneRebalanceAbandoned {
		t.Fatalf("learner unscheduled for 5 minutes: removed %v (%s: %s), want demo-3 for ZoneRebalanceAbandoned", a.Members, a.Reason, a.Message)
	}
	delete(pods, "demo-3")
	got = operatortest.Get(t, c)
	if zr := got.Status.ZoneRebalance; zr == nil || zr.GaveUpAt == nil || hasMember(got, "demo-3") {
		t.Fatalf("after the removal: zoneRebalance %+v, members %+v; want the move given up and demo-3 gone", zr, got.Status.Members)
	}
	if members, _, err := cl.MemberList(ctx); err != nil || len(members) != 3 {
		t.Fatalf("etcd members %+v (%v), want the 3 voters only", members, err)
	}
	gaveUp := got.Status.ZoneRebalance.GaveUpAt.Time

	p, a = round(gaveUp.Add(10 * time.Minute))
	if a.Kind != planner.None {
		t.Fatalf("within the backoff: %s %v (%s), want nothing", a.Kind, a.Members, a.Message)
	}
	p.recordSpread()
	if cond := meta.FindStatusCondition(p.c.Status.Conditions, etcdv1alpha1.ConditionSpread); cond == nil || cond.Reason != string(reason.MembersShareAZone) ||
		!strings.Contains(cond.Message, "moving demo-3 into zone b was given up") {
		t.Fatalf("Spread %+v, want MembersShareAZone saying the move was given up", cond)
	}
	if _, a := round(gaveUp.Add(planner.RebalanceBackoff)); a.Kind != planner.AddLearner || a.Zone != "b" || a.Members[0] != "demo-4" {
		t.Fatalf("after the backoff: %s %v zone %q, want a new learner demo-4 for zone b", a.Kind, a.Members, a.Zone)
	}

	// The end of a move, as it comes once the learner votes. envtest runs no learner, so demo-2 stands
	// for it (recorded as the move's member, in zone c) and the passes ask for one voter fewer than etcd
	// has, which is what the promotion leaves: a member of crowded zone a goes, recorded ahead, and the
	// move's end is announced.
	operatortest.Eventually(t, "record demo-2 as the move's member", func() error {
		cur := operatortest.Get(t, c)
		cur.Status.ZoneRebalance = &etcdv1alpha1.ZoneRebalance{Zone: "c", Member: "demo-2", StartedAt: metav1.Now()}
		return k8s.Status().Update(ctx, cur)
	})
	replicas = 2
	later := gaveUp.Add(time.Hour)
	if _, a := round(later); a.Kind == planner.MoveLeader {
		step(later, planner.MoveLeader, planner.MoveLeader)
	}
	a = step(later, planner.RemoveMember, planner.FinishRemove)
	if a.Reason != reason.RebalancingZones || a.Members[0] == "demo-2" || !strings.Contains(a.Message, "from zone a") {
		t.Fatalf("removed %v (%s: %s), want a member of zone a for RebalancingZones", a.Members, a.Reason, a.Message)
	}
	if zr := operatortest.Get(t, c).Status.ZoneRebalance; zr.FinishedAt == nil {
		t.Fatalf("zoneRebalance %+v, want the move finished", zr)
	}
	var events []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.HasPrefix(e, "Normal "+string(reason.ZonesRebalanced)) {
			events = append(events, e)
		}
	}
	if len(events) != 1 || !strings.Contains(events[0], "demo-2 votes in zone c and "+a.Members[0]+" is removed") {
		t.Fatalf("ZonesRebalanced events %q, want one naming demo-2 and %s", events, a.Members[0])
	}
}
