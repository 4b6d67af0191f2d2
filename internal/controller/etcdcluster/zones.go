package etcdcluster

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// nodeListTimeout bounds the wait for the Node informer: a cluster whose operator may not read Nodes
// (an older role) gets no zone verdict and no cordons, not a stalled pass.
const nodeListTimeout = 5 * time.Second

// observeNodes reads the zones of the nodes (topology.kubernetes.io/zone), which zones have a Ready
// node open to this cluster's member pods (not cordoned, and no NoSchedule or NoExecute taint the pod
// template does not tolerate), and which nodes are cordoned. Not knowing only leaves the zones out of
// the Spread verdict and the cordons out of nodeMaintenance Replace.
func (p *pass) observeNodes(ctx context.Context, o *observation) {
	ctx, cancel := context.WithTimeout(ctx, nodeListTimeout)
	defer cancel()
	nodes := &corev1.NodeList{}
	if err := p.r.List(ctx, nodes); err != nil {
		log.FromContext(ctx).V(1).Info("nodes not read; placement judged by node only", "error", err.Error())
		return
	}
	o.zones = zonesOf(nodes.Items, p.c.Spec.PodTemplate.Tolerations)
	o.cordoned = map[string]bool{}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			o.cordoned[n.Name] = true
		}
	}
}

// cordonedMembers maps each member whose volume is on a cordoned node to that node: the node the
// scheduler chose for the member's volume (a WaitForFirstConsumer claim records it), else the node of
// the member's pod.
func cordonedMembers(o *observation) map[string]string {
	out := map[string]string{}
	node := func(name string) string {
		if pvc := o.pvcs[name]; pvc != nil && pvc.Annotations[annSelectedNode] != "" {
			return pvc.Annotations[annSelectedNode]
		}
		if pod := o.pods[name]; pod != nil {
			return pod.Spec.NodeName
		}
		return ""
	}
	for name := range o.pvcs {
		if n := node(name); o.cordoned[n] {
			out[name] = n
		}
	}
	return out
}

// membersNodes maps each member status records to the node of its pod, "" while it has none (no
// pod, a pod being deleted, or one not scheduled yet).
func membersNodes(c *etcdv1alpha1.EtcdCluster, o *observation) map[string]string {
	nodeOf := map[string]string{}
	for _, ms := range c.Status.Members {
		nodeOf[ms.Name] = ""
		if pod := o.pods[ms.Name]; pod != nil && pod.DeletionTimestamp == nil {
			nodeOf[ms.Name] = pod.Spec.NodeName
		}
	}
	return nodeOf
}

// placementInput is where the members run and what the nodes say of zones, for the zone rebalance.
func placementInput(c *etcdv1alpha1.EtcdCluster, o *observation, zoneSettle time.Duration) planner.Placement {
	return planner.Placement{NodeOf: membersNodes(c, o), Zones: o.zones, Default: resources.DefaultPlacement(c), ZoneSettle: zoneSettle}
}

// rebalanceInput is the last zone move recorded, nil when none.
func rebalanceInput(c *etcdv1alpha1.EtcdCluster) *planner.Rebalance {
	r := c.Status.ZoneRebalance
	if r == nil {
		return nil
	}
	out := &planner.Rebalance{Zone: r.Zone, Member: r.Member, Started: r.StartedAt.Time}
	if r.FinishedAt != nil {
		out.Finished = r.FinishedAt.Time
	}
	if r.GaveUpAt != nil {
		out.GaveUp = r.GaveUpAt.Time
	}
	return out
}

// recordRebalance writes, ahead of the membership call of action, what it does to a zone move: the
// zone of the learner it adds (on the member's status entry, which the pod is built from), that
// the move is over (a crowded zone's member removed), or that it was given up (the learner found
// no node in its zone). Recorded before the call, so an operator that dies right after it keeps
// the intent.
func recordRebalance(c *etcdv1alpha1.EtcdCluster, a planner.Action, now time.Time) {
	r, at := c.Status.ZoneRebalance, metav1.NewTime(now)
	switch {
	case a.Kind == planner.AddLearner && a.Zone != "":
		setMemberZone(c, a.Members[0], a.Zone)
		c.Status.ZoneRebalance = &etcdv1alpha1.ZoneRebalance{Zone: a.Zone, Member: a.Members[0], StartedAt: at}
	case r == nil || a.Kind != planner.RemoveMember:
	case a.Reason == reason.RebalancingZones && r.FinishedAt == nil:
		r.FinishedAt = &at
		// The member is placed: should its pod be re-created, its volume and the default placement say where.
		setMemberZone(c, r.Member, "")
	case a.Reason == reason.ZoneRebalanceAbandoned && a.Members[0] == r.Member && r.GaveUpAt == nil:
		r.GaveUpAt = &at
	}
}

func setMemberZone(c *etcdv1alpha1.EtcdCluster, name, zone string) {
	for i := range c.Status.Members {
		if c.Status.Members[i].Name == name {
			c.Status.Members[i].Zone = zone
		}
	}
}

// memberZone is the zone a member's pod must run in, "" when none.
func memberZone(c *etcdv1alpha1.EtcdCluster, name string) string {
	for _, m := range c.Status.Members {
		if m.Name == name {
			return m.Zone
		}
	}
	return ""
}

// annSelectedNode is where the scheduler records the node it chose for a claim whose StorageClass
// binds on first use (WaitForFirstConsumer), as node-local volumes do.
const annSelectedNode = "volume.kubernetes.io/selected-node"

// zonesOf is observeNodes' reading of nodes for pods with tolerations. A zone is open since the
// earliest Ready transition of its open nodes: the zone rebalance waits for a zone to stay open.
func zonesOf(nodes []corev1.Node, tolerations []corev1.Toleration) planner.Zones {
	z := planner.Zones{Of: map[string]string{}, OpenSince: map[string]time.Time{}}
	for i := range nodes {
		n := &nodes[i]
		zone := n.Labels[corev1.LabelTopologyZone]
		if zone == "" {
			continue
		}
		z.Of[n.Name] = zone
		if !openTo(n, tolerations) {
			continue
		}
		if !slices.Contains(z.Open, zone) {
			z.Open = append(z.Open, zone)
		}
		if since, ok := z.OpenSince[zone]; !ok || readySince(n).Before(since) {
			z.OpenSince[zone] = readySince(n)
		}
	}
	slices.Sort(z.Open)
	return z
}

// readySince is when n last turned Ready (zero when it does not say).
func readySince(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// openTo says whether a new pod with tolerations could start on n.
func openTo(n *corev1.Node, tolerations []corev1.Toleration) bool {
	if n.Spec.Unschedulable || !nodeReady(n) {
		return false
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(taint) }) {
			return false
		}
	}
	return true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// slimNode is the cache's transform for Nodes: only what observeNodes reads is kept, so that the
// operator's memory does not grow with the size of every node's status (images, addresses, capacity).
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
	}
	if zone, ok := n.Labels[corev1.LabelTopologyZone]; ok {
		slim.Labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			slim.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return slim, nil
}
