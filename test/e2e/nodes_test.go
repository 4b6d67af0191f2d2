//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// The node-fault suite needs the local cluster with several nodes (make cluster-up NODES=4,
// docs/dev/local-cluster.md); on fewer nodes its tests skip.
const nodeFaultNodes = 4

// needNodes skips the test on a cluster with fewer Ready nodes than the node-fault suite needs.
func needNodes(t *testing.T) []string {
	t.Helper()
	nodes := env.ReadyNodes(t)
	if len(nodes) < nodeFaultNodes {
		t.Skipf("needs %d Ready nodes (make cluster-up NODES=%d); the cluster has %d", nodeFaultNodes, nodeFaultNodes, len(nodes))
	}
	return nodes
}

// nodeFigure writes one of the figures the node faults are held to into NODES_RESULTS (make
// bench-nodes: bench/results). They have no baseline, so ratio = value.
func nodeFigure(t *testing.T, r framework.BenchResult) {
	t.Helper()
	dir := os.Getenv("NODES_RESULTS")
	if dir == "" {
		return
	}
	r.Ratio, r.Date, r.Command = r.Value, time.Now().UTC().Format(time.RFC3339), "make bench-nodes"
	if err := framework.WriteBenchResult(dir, r); err != nil {
		t.Error(err)
	}
}

// nodeFault runs hack/cluster/node.sh verb on the node named name.
func nodeFault(t *testing.T, verb, name string) {
	t.Helper()
	if err := env.NodeFault(verb, name); err != nil {
		t.Fatal(err)
	}
}

// memberNodes maps each member pod of c to the node it runs on.
func memberNodes(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := env.MemberPods(t, c)
	out := map[string]string{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// startNodeCluster creates a 3-member cluster on the default (node-local) volumes, whose failed members
// are replaced after replaceAfter, with its own operator, and waits for it to converge.
func startNodeCluster(t *testing.T, replaceAfter string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	ns := env.NewNamespace(t, "e2e-node-")
	env.StartOperator(t, ns, "", "ZONE_SETTLE="+suiteZoneSettle.String())
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	c.Spec.Replicas = 3
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	c.Spec.Maintenance.ReplaceFailedMemberAfter = replaceAfter
	if err := env.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	return c
}

// switchableFollower picks a follower on a node node.sh can switch off (any but the first); it skips
// the test when every follower runs on the first node.
func switchableFollower(t *testing.T, c *etcdv1alpha1.EtcdCluster, placement map[string]string) (member, node string) {
	t.Helper()
	for _, m := range env.Get(t, c).Status.Members {
		if n := placement[m.Name]; m.Role != etcdv1alpha1.RoleLeader && strings.Contains(n, "-") {
			return m.Name, n
		}
	}
	t.Skipf("every follower runs on the first node, which node.sh does not switch off: %v", placement)
	return "", ""
}

// zoneLossFollower is a member whose node is the only node of its zone, so that switching that node
// off loses a whole zone (zones a, b, c, a: the second and third nodes); when that member leads,
// leadership is moved off it first, so that the power-off takes a follower. Without one, any follower
// on a node that can be switched off.
func zoneLossFollower(t *testing.T, c *etcdv1alpha1.EtcdCluster, cl *clientv3.Client, placement map[string]string) (member, node string) {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := env.K8s.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	inZone := map[string]int{}
	zoneOf := map[string]string{}
	for _, n := range nodes.Items {
		zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
		inZone[zoneOf[n.Name]]++
	}
	for _, m := range env.Get(t, c).Status.Members {
		if n := placement[m.Name]; strings.Contains(n, "-") && zoneOf[n] != "" && inZone[zoneOf[n]] == 1 {
			if m.Role == etcdv1alpha1.RoleLeader {
				moveLeader(t, c, cl)
			}
			t.Logf("switching off %s, the only node of zone %s, where %s runs", n, zoneOf[n], m.Name)
			return m.Name, n
		}
	}
	t.Logf("no member runs alone in its zone on a node that can be switched off (%v): the power-off loses a node, not a zone", placement)
	return switchableFollower(t, c, placement)
}

// sampleAvailable reads c every second and counts the samples in which it is Available; stop ends the
// sampling and returns the counts.
func sampleAvailable(c *etcdv1alpha1.EtcdCluster) (stop func() (available, samples int)) {
	var available, samples int
	stopEvery := framework.Every(time.Second, func() {
		cur := &etcdv1alpha1.EtcdCluster{}
		if env.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur) == nil {
			samples++
			if meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable) {
				available++
			}
		}
	})
	return func() (int, int) {
		stopEvery()
		return available, samples
	}
}

// statusMemberIDs maps each member of c's status to its etcd member ID.
func statusMemberIDs(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, m := range env.Get(t, c).Status.Members {
		ids[m.Name] = m.ID
	}
	return ids
}

// TestNodeFaults runs the node faults users meet, in turn, on one 3-member cluster on node-local volumes
// (local-path) under one writer, so the cluster is built once: a node that flaps inside the grace
// period, a node pool upgrade that drains every node, then a node that loses power for good. Every
// acknowledged write must be kept through all three.
func TestNodeFaults(t *testing.T) {
	nodes := needNodes(t)
	c := startNodeCluster(t, "3m")
	cl := env.EtcdClient(t, c)
	stopFollowing := framework.FollowPods(cl, func() ([]string, error) { return env.CurrentEndpoints(c) })
	w := framework.StartWriter(cl, "/node-faults/")
	w.FaultBegins()
	t.Run("FlapInsideTheGracePeriodChangesNothing", func(t *testing.T) { flapInsideTheGracePeriod(t, c) })
	t.Run("DrainOfEveryNodeInTurn", func(t *testing.T) { drainEveryNodeInTurn(t, c, nodes) })
	t.Run("DrainWithReplacePolicyMovesTheMember", func(t *testing.T) { drainWithReplace(t, c, cl) })
	t.Run("PowerOffWithLocalVolume", func(t *testing.T) { powerOffWithLocalVolume(t, c, cl) })
	w.FaultEnds()
	env.WaitConverged(t, c, 3, convergeTimeout)
	acked, failed := env.StopWriter(t, w, stopFollowing, cl, c)
	framework.CheckWrites(t, cl, w)
	t.Logf("writer through every node fault: %d acknowledged, %d failed attempts (retried)", len(acked), failed)
}

// flapInsideTheGracePeriod: a follower's node is off for 30 s, well inside
// spec.maintenance.replaceFailedMemberAfter (3m). When it comes back the same member (same etcd ID,
// same node, so the same local volume) serves again: a short outage must never cost a member its data.
func flapInsideTheGracePeriod(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	before, ids := memberNodes(t, c), statusMemberIDs(t, c)
	victim, node := switchableFollower(t, c, before)
	stopSampling := sampleAvailable(c)
	nodeFault(t, "poweroff", node)
	poweredOn := false
	t.Cleanup(func() {
		if !poweredOn {
			nodeFault(t, "poweron", node)
		}
	})
	time.Sleep(30 * time.Second)
	nodeFault(t, "poweron", node)
	poweredOn = true

	env.WaitConverged(t, c, 3, convergeTimeout)
	available, samples := stopSampling()
	if after := memberNodes(t, c); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("placement changed by a flap inside the grace period: %v, was %v", after, before)
	}
	if after := statusMemberIDs(t, c); fmt.Sprint(after) != fmt.Sprint(ids) {
		t.Errorf("members changed by a flap inside the grace period: %v, was %v (%s was replaced)", after, ids, victim)
	}
	if available != samples {
		t.Errorf("Available in %d of %d samples while one follower's node flapped; want every one", available, samples)
	}
	t.Logf("%s's node %s off for 30 s: same members on the same nodes, Available in %d of %d samples", victim, node, available, samples)
}

// drainEveryNodeInTurn is a node pool upgrade: each node in turn is cordoned, the member pods on it
// are evicted through the eviction API (as kubectl drain does, retrying while the disruption budget
// refuses), and it is uncordoned once they are gone. A member's local volume holds its new pod
// Pending until its node is back; the operator waits for it (the default) and the cluster stays
// Available throughout.
func drainEveryNodeInTurn(t *testing.T, c *etcdv1alpha1.EtcdCluster, nodes []string) {
	ctx := context.Background()
	ids := statusMemberIDs(t, c)
	stopSampling := sampleAvailable(c)
	for _, node := range nodes {
		cordon(t, node, true)
		uncordoned := false
		t.Cleanup(func() {
			if !uncordoned {
				cordon(t, node, false)
			}
		})
		var evicted []string
		for m, n := range memberNodes(t, c) {
			if n != node {
				continue
			}
			framework.WaitFor(t, "the budget lets "+m+" go", 5*time.Minute, func() error { return evict(c.Namespace, m) })
			evicted = append(evicted, m)
		}
		framework.WaitFor(t, fmt.Sprintf("%s drained (%v evicted)", node, evicted), 2*time.Minute, func() error {
			pods := &corev1.PodList{}
			if err := env.K8s.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning {
					return fmt.Errorf("%s still runs on %s", p.Name, node)
				}
			}
			return nil
		})
		cordon(t, node, false)
		uncordoned = true
		env.WaitConverged(t, c, 3, convergeTimeout)
		t.Logf("%s drained and back: %v evicted, placement %v", node, evicted, memberNodes(t, c))
	}
	available, samples := stopSampling()
	if available != samples {
		t.Errorf("Available in %d of %d samples during the drains; want every one", available, samples)
	}
	if after := statusMemberIDs(t, c); fmt.Sprint(after) != fmt.Sprint(ids) {
		t.Errorf("members replaced during the drains: %v, was %v (each waited for its node)", after, ids)
	}
	t.Logf("%d nodes drained in turn: Available in %d of %d samples", len(nodes), available, samples)
	nodeFigure(t, framework.BenchResult{Metric: "nodes_drain_each_node_available_fraction", Value: float64(available) / float64(samples), Unit: "fraction",
		Notes: fmt.Sprintf("Available=True in %d of %d 1-s samples while %d nodes were drained in turn under a writer; goal 1", available, samples, len(nodes))})
}

// drainWithReplace: with maintenance.nodeMaintenance Replace, a follower's node is cordoned and its pod
// evicted; instead of waiting for the node (the default), the operator replaces the member at once with
// a new one on another node, the cluster Available throughout. The node is uncordoned only afterwards;
// when it is its zone's only node, the replacement went to another zone, and the operator moves a
// member back once the zone is open again (waitZonesRebalanced), before the next fault starts.
func drainWithReplace(t *testing.T, c *etcdv1alpha1.EtcdCluster, cl *clientv3.Client) {
	ctx := context.Background()
	setNodeMaintenance := func(policy string) {
		t.Helper()
		cur := env.Get(t, c)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Maintenance.NodeMaintenance = policy
		if err := env.K8s.Patch(ctx, cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	setNodeMaintenance(planner.NodeMaintenanceReplace)
	defer setNodeMaintenance(planner.NodeMaintenanceWaitForNode)
	before := memberNodes(t, c)
	victim, node := switchableFollower(t, c, before)
	stopSampling := sampleAvailable(c)
	start := time.Now()
	cordon(t, node, true)
	defer cordon(t, node, false)
	framework.WaitFor(t, "the budget lets "+victim+" go", 5*time.Minute, func() error { return evict(c.Namespace, victim) })
	framework.WaitFor(t, victim+" replaced by a member on another node", 5*time.Minute, func() error {
		for _, m := range env.Get(t, c).Status.Members {
			if m.Name == victim {
				return fmt.Errorf("%s still a member", victim)
			}
		}
		if err := env.Converged(c, 3); err != nil {
			return err
		}
		now := memberNodes(t, c)
		if len(now) != 3 {
			return fmt.Errorf("member pods %v", now)
		}
		for m, n := range now {
			if n == node || n == "" {
				return fmt.Errorf("member %s on node %q, want one other than the cordoned %s (%v)", m, n, node, now)
			}
		}
		return nil
	})
	moved := time.Since(start)
	available, samples := stopSampling()
	if available != samples {
		t.Errorf("Available in %d of %d samples while %s moved off cordoned %s; want every one", available, samples, victim, node)
	}
	t.Logf("%s on cordoned %s replaced %s after the cordon: placement %v, was %v; Available in %d of %d samples",
		victim, node, moved.Round(time.Second), memberNodes(t, c), before, available, samples)
	cordon(t, node, false)
	waitZonesRebalanced(t, c, cl, node)
}

// powerOffWithLocalVolume: a follower's node loses power for good, with the member's data on a
// node-local volume; where the placement allows, that node is its zone's only one, so a zone is lost.
// etcd reports the member failing; after spec.maintenance.replaceFailedMemberAfter (lowered to 1m here)
// the operator must bring the cluster back to three healthy voters, one of them on another node, and
// stay Available throughout; when the node comes back, its old member must not rejoin, Spread says
// whether the zones are now unevenly held (checkZoneSpread), and the operator moves a member back
// into the returned zone without the voters ever dropping below spec.replicas (waitZonesRebalanced).
func powerOffWithLocalVolume(t *testing.T, c *etcdv1alpha1.EtcdCluster, cl *clientv3.Client) {
	ctx := context.Background()
	cur := env.Get(t, c)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Maintenance.ReplaceFailedMemberAfter = "1m"
	if err := env.K8s.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	before := memberNodes(t, c)
	victim, node := zoneLossFollower(t, c, cl, before)
	victimID := statusMemberIDs(t, c)[victim]
	if victimID == "" {
		t.Fatalf("no member ID recorded for %s", victim)
	}
	stopSampling := sampleAvailable(c)
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
	available, samples := stopSampling()
	if available*100 < samples*99 {
		t.Errorf("Available in %d of %d samples while %s was off; want at least 99 %%", available, samples, node)
	}
	t.Logf("back to 3 healthy voters, none on %s, %s after the power-off (grace 1m); Available in %d of %d samples; placement %v, was %v",
		node, back.Round(time.Second), available, samples, memberNodes(t, c), before)
	goal := (time.Minute + 90*time.Second).Seconds()
	nodeFigure(t, framework.BenchResult{Metric: "nodes_poweroff_back_to_full_strength_seconds", Value: back.Seconds(), Unit: "s", Goal: &goal,
		Notes: "a follower's node (its zone's only one) powered off for good with the member on a node-local volume, until 3 healthy voters none on it; replaceFailedMemberAfter 1m, goal = it + 90 s"})
	nodeFigure(t, framework.BenchResult{Metric: "nodes_poweroff_available_fraction", Value: float64(available) / float64(samples), Unit: "fraction",
		Notes: fmt.Sprintf("Available=True in %d of %d 1-s samples from the power-off until full strength; goal ≥ 0.99", available, samples)})

	nodeFault(t, "poweron", node)
	poweredOn = true
	time.Sleep(30 * time.Second) // the node's kubelet is back: whatever it restarts has had time to try
	resp, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// By its ID: the zone move back into the returned zone may have added a learner by now.
	for _, m := range resp.Members {
		if fmt.Sprintf("%x", m.ID) == victimID {
			t.Errorf("member %s (%x), removed while %s was off, is in the member list after it came back: the old member rejoined", m.Name, m.ID, node)
		}
	}
	checkZoneSpread(t, c, node)
	waitZonesRebalanced(t, c, cl, node)
}

// suiteZoneSettle is the zone settle the suite's operators are given (ZONE_SETTLE) instead of the
// default 2 minutes (planner.DefaultZoneSettle, held by the planner's table tests): the wait is the
// operator's own timer, not something the cluster does, and 90 s of it were the longest stretch of
// the suite, which runs in make test.
const suiteZoneSettle = 30 * time.Second

// rebalanceTimeout bounds the move of a member back into a returned zone: the zone's settling
// (suiteZoneSettle), a learner's start and copy, its promotion, and a removal.
const rebalanceTimeout = suiteZoneSettle + 4*time.Minute

// waitZonesRebalanced: with node back (and its zone with it), the operator moves a member back into
// the zone the power-off emptied (RebalancingZones): within rebalanceTimeout the members are one per
// zone again (as many per zone as the open zones allow), c has converged and Spread is True. etcd's
// member list is sampled every second meanwhile: the voters must never drop below spec.replicas, since
// the learner is promoted before a member of the crowded zone is removed. When the power-off lost a
// node but not a zone, nothing moves and this holds at once.
func waitZonesRebalanced(t *testing.T, c *etcdv1alpha1.EtcdCluster, cl *clientv3.Client, node string) {
	t.Helper()
	replicas := int(env.Get(t, c).Spec.Replicas)
	fewest, most, samples := replicas, 0, 0
	stopSampling := framework.Every(time.Second, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cl.MemberList(ctx)
		if err != nil {
			return // a sample etcd did not answer says nothing about the voters
		}
		voters := 0
		for _, m := range resp.Members {
			if !m.IsLearner {
				voters++
			}
		}
		samples++
		fewest, most = min(fewest, voters), max(most, voters)
	})
	start := time.Now()
	// Until the node controller lifts a returning node's taints, its zone would count as no zone at
	// all, and the zones would look even before any move.
	framework.WaitFor(t, node+" open to members again", 2*time.Minute, func() error {
		n := &corev1.Node{}
		if err := env.K8s.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		return nodeOpen(n)
	})
	framework.WaitFor(t, "one member per zone again ("+node+" back)", rebalanceTimeout, func() error {
		perZone, err := membersPerZone(c)
		if err != nil {
			return err
		}
		least, crowded := replicas, 0
		for _, k := range perZone {
			least, crowded = min(least, k), max(crowded, k)
		}
		if crowded-least > 1 {
			return fmt.Errorf("members per zone %v", perZone)
		}
		if err := env.Converged(c, int32(replicas)); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != string(reason.MembersOnSeparateNodes) {
			return fmt.Errorf("Spread = %+v (members per zone %v)", cond, perZone)
		}
		return nil
	})
	stopSampling()
	if fewest < replicas {
		t.Errorf("the voters dropped to %d of %d while the zones were rebalanced (%d samples)", fewest, replicas, samples)
	}
	zr := env.Get(t, c).Status.ZoneRebalance
	t.Logf("zones even %s after %s came back; voters between %d and %d in %d samples; last move %+v",
		time.Since(start).Round(time.Second), node, fewest, most, samples, zr)
}

// checkZoneSpread: with node back, Spread judges the zones as they are now. The replacement made while
// node was off went to a node left, so when node is its zone's only one, that zone may now hold no
// member while another holds two: Spread False, MembersShareAZone. The verdict is held to one worked
// out here from the Nodes as they are at each look (a returning node's taints go a little later):
// members per zone, counting the zones of Ready, schedulable, untainted nodes that hold none.
func checkZoneSpread(t *testing.T, c *etcdv1alpha1.EtcdCluster, node string) {
	t.Helper()
	framework.WaitFor(t, "Spread as the zones are ("+node+" back)", 2*time.Minute, func() error {
		perZone, err := membersPerZone(c)
		if err != nil {
			return err
		}
		most, least := 0, 3
		for _, k := range perZone {
			most, least = max(most, k), min(least, k)
		}
		wantStatus, wantReason := metav1.ConditionTrue, reason.MembersOnSeparateNodes
		if most-least > 1 {
			wantStatus, wantReason = metav1.ConditionFalse, reason.MembersShareAZone
		}
		cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionSpread)
		if cond == nil || cond.Status != wantStatus || cond.Reason != string(wantReason) {
			return fmt.Errorf("Spread = %+v; want %s %s (members per zone %v)", cond, wantStatus, wantReason, perZone)
		}
		t.Logf("Spread %s %s (members per zone %v): %s", cond.Status, cond.Reason, perZone, cond.Message)
		return nil
	})
}

// membersPerZone counts c's member pods per zone, with 0 for each zone of a Ready, schedulable,
// untainted node that holds none.
func membersPerZone(c *etcdv1alpha1.EtcdCluster) (map[string]int, error) {
	nodes := &corev1.NodeList{}
	if err := env.K8s.List(context.Background(), nodes); err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return nil, err
	}
	perZone, zoneOf := map[string]int{}, map[string]string{}
	for _, n := range nodes.Items {
		zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
		if nodeOpen(&n) == nil {
			perZone[zoneOf[n.Name]] += 0
		}
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Labels[naming.LabelMember] != "" {
			perZone[zoneOf[p.Spec.NodeName]]++
		}
	}
	return perZone, nil
}

// nodeOpen says why members cannot be placed on n, nil when they can: it is Ready, schedulable
// and untainted.
func nodeOpen(n *corev1.Node) error {
	ready := false
	for _, cond := range n.Status.Conditions {
		ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
	}
	switch {
	case !ready:
		return fmt.Errorf("node %s not Ready", n.Name)
	case n.Spec.Unschedulable:
		return fmt.Errorf("node %s cordoned", n.Name)
	case len(n.Spec.Taints) > 0:
		return fmt.Errorf("node %s tainted %v", n.Name, n.Spec.Taints)
	}
	return nil
}

// cordon marks node unschedulable (on) or schedulable again, as kubectl cordon/uncordon do.
func cordon(t *testing.T, node string, on bool) {
	t.Helper()
	n := &corev1.Node{}
	if err := env.K8s.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = on
	if err := env.K8s.Patch(context.Background(), n, patch); err != nil {
		t.Fatalf("cordon %s=%v: %v", node, on, err)
	}
}

// TestNodeZoneSpreadOfNewClusters: the default placement of a 3-member cluster on nodes in three zones
// (a, b, c, a) puts one member in each zone, every time. Ten clusters are created, five at a time, and
// each is deleted once its members are placed (each counts only its own members); placement is the scheduler's work from the constraints
// the operator writes, so waiting for the clusters to serve adds nothing.
func TestNodeZoneSpreadOfNewClusters(t *testing.T) {
	nodes := needNodes(t)
	ctx := context.Background()
	zoneOf := map[string]string{}
	for _, name := range nodes {
		n := &corev1.Node{}
		if err := env.K8s.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		zoneOf[name] = n.Labels[corev1.LabelTopologyZone]
	}
	ns := env.NewNamespace(t, "e2e-zones-")
	env.StartOperator(t, ns, "")
	const creations, together = 10, 5
	var mu sync.Mutex
	spread := 0
	for batch := 0; batch < creations; batch += together {
		var wg sync.WaitGroup
		for i := batch; i < batch+together; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				placement, err := placeAndDelete(ctx, ns, fmt.Sprintf("zones-%d", i))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("zones-%d: %v", i, err)
					return
				}
				zones := map[string]bool{}
				for _, n := range placement {
					zones[zoneOf[n]] = true
				}
				if len(zones) == 3 {
					spread++
				} else {
					t.Errorf("zones-%d: members in %d zones: %v (zones %v)", i, len(zones), placement, zoneOf)
				}
			}()
		}
		wg.Wait()
	}
	t.Logf("one member per zone in %d of %d creations", spread, creations)
	nodeFigure(t, framework.BenchResult{Metric: "nodes_default_placement_one_member_per_zone", Value: float64(spread), Unit: "count",
		Notes: fmt.Sprintf("3-member clusters created on 4 nodes in 3 zones that got one member per zone, of %d; goal every one", creations)})
}

// placeAndDelete creates a 3-member cluster, waits until the scheduler has placed its three members,
// deletes it and returns member -> node.
func placeAndDelete(ctx context.Context, ns, name string) (map[string]string, error) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	c.Spec.Replicas = 3
	// In memory: no volume to provision (local-path makes one through a helper pod, one at a time), and
	// the same constraints as members on new volumes, whose spread by node is a rule.
	c.Spec.Storage.Medium = etcdv1alpha1.StorageMediumMemory
	c.Spec.Storage.Size = resource.MustParse("192Mi")
	if err := env.K8s.Create(ctx, c); err != nil {
		return nil, err
	}
	defer func() { _ = env.K8s.Delete(ctx, c) }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods := &corev1.PodList{}
		if err := env.K8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(naming.Labels(name))); err != nil {
			return nil, err
		}
		placement := map[string]string{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				placement[p.Name] = p.Spec.NodeName
			}
		}
		if len(placement) >= 3 {
			return placement, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("three members not placed after 3m: %v", placement)
		}
		time.Sleep(time.Second)
	}
}
