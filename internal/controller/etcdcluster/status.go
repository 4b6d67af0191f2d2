package etcdcluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// writeStatus is the one writer of an EtcdCluster's status: everything else changes p.c.Status and calls
// it, and no other function of this package calls the status subresource (TestOneStatusWriter holds
// that). The rules every caller relies on:
//   - It writes only when status changed since the last write, so an idle cluster costs no API writes.
//   - It writes under an optimistic lock: a pass that decided on a stale view gets a Conflict, returns
//     it, and ends there; Reconcile requeues, and the next pass looks again.
//   - A record that must outlive a crash is written before the irreversible call it announces (a
//     pending member addition or removal, a downgrade target, an upgrade block, a recovery or a
//     take-over started, a divergence before its member is contained): the call is made only once the
//     record is stored. The result of a call that is harmless to repeat is written after it.
func (p *pass) writeStatus(ctx context.Context) error {
	written, err := shared.PatchStatusIfChanged(ctx, p.r.Client, p.orig, p.c, p.orig.Status, p.c.Status)
	if written {
		p.orig = p.c.DeepCopy()
	}
	return err
}

func idString(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 16)
}

func parseID(s string) uint64 {
	id, _ := strconv.ParseUint(s, 16, 64)
	return id
}

// settleNoSpace forgets the progress of a NOSPACE clearing once etcd says the alarm is gone
// (disarmed, by the operator or by hand): the next alarm starts a round of its own.
func (p *pass) settleNoSpace() {
	if p.obs.noSpaceGone {
		p.c.Status.NoSpace = nil
	}
}

// recordObservation writes what this pass saw into status, and the conditions and phase that follow
// from it and from the action about to be taken (decided by planner.Availability and planner.Conditions).
func (p *pass) recordObservation(action planner.Action) {
	c := p.c
	n := p.recordMembers()
	p.recordCluster(n)
	h := p.health(n, action)
	setPlannerCondition(c, p.availability(h))
	if p.recordQuorumLoss(action, h.Quorum()) {
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumLost)
		h.QuorumLost = &planner.Problem{Why: reason.Reason(cond.Reason), Message: cond.Message}
	}
	s := planner.Conditions(h, action)
	for _, w := range s.Warnings {
		p.r.Recorder.Event(c, corev1.EventTypeWarning, string(w.Reason), w.Message)
	}
	if s.Degraded != nil {
		setPlannerCondition(c, *s.Degraded)
	}
	setPlannerCondition(c, s.Progressing)
	switch {
	case s.RemoveUpgrading:
		meta.RemoveStatusCondition(&c.Status.Conditions, etcdv1alpha1.ConditionUpgrading)
	case s.Upgrading != nil:
		setPlannerCondition(c, *s.Upgrading)
	}
	p.recordSpread()
	c.Status.Phase = s.Phase
}

// setPlannerCondition sets a condition the planner decided.
func setPlannerCondition(c *etcdv1alpha1.EtcdCluster, cond planner.Condition) {
	shared.SetCondition(&c.Status.Conditions, c.Generation, cond.Type, cond.Status, cond.Reason, cond.Message)
}

// memberCounts are the voting members in etcd, those healthy, and those healthy whose pod is Ready
// (servingVoters: the client Service routes only to Ready pods, so they are what a client of the
// published endpoint can reach).
type memberCounts struct {
	voters, healthyVoters, servingVoters int32
	// minVersion is the lowest version a member reports; nil when none answered.
	minVersion *versions.Version
}

// recordMembers writes each member's identity, role, health and version into status.
func (p *pass) recordMembers() memberCounts {
	c, o := p.c, p.obs
	learners, peerURLs := map[uint64]bool{}, o.peerURLs()
	for _, m := range o.members {
		learners[m.ID] = m.IsLearner
	}
	var n memberCounts
	for i := range c.Status.Members {
		ms := &c.Status.Members[i]
		id, inEtcd := o.ids[ms.Name]
		st, answered := o.status[id]
		healthy := inEtcd && memberHealthy(o, id)
		ms.PeerURL = resources.MemberPeerURL(c, ms.Name)
		if u := peerURLs[ms.Name]; u != "" {
			ms.PeerURL = u // what etcd has: it differs while a take-over moves the peer URLs to TLS
		}
		ms.ClientURL = naming.ClientURL(c.Name, c.Namespace, ms.Name, resources.ClientTLS(c))
		if o.etcd == nil {
			// Nothing answered: keep what was last known of identities, but nobody is healthy.
			ms.Healthy, ms.Role = false, ""
		} else {
			ms.ID = idString(id)
			ms.Healthy = healthy
			ms.Role = memberRole(o, id, inEtcd, learners[id])
		}
		if answered {
			ms.Version = st.Version
			if v, err := versions.Parse(st.Version); err == nil && (n.minVersion == nil || v.Compare(*n.minVersion) < 0) {
				n.minVersion = &v
			}
		}
		if inEtcd && !learners[id] {
			n.voters++
			if ms.Healthy {
				n.healthyVoters++
				if podReady(o.pods[ms.Name]) {
					n.servingVoters++
				}
			}
		}
	}
	return n
}

// memberRole is a member's role as etcd reports it ("" when not in etcd's member list).
func memberRole(o *observation, id uint64, inEtcd, learner bool) etcdv1alpha1.MemberRole {
	switch {
	case !inEtcd:
		return ""
	case learner:
		return etcdv1alpha1.RoleLearner
	case id == o.leaderID:
		return etcdv1alpha1.RoleLeader
	default:
		return etcdv1alpha1.RoleFollower
	}
}

// recordCluster writes what this pass saw of the cluster as a whole into status: its ID, version,
// replica counts, selector and endpoints.
func (p *pass) recordCluster(n memberCounts) {
	c, o := p.c, p.obs
	if o.etcd != nil {
		c.Status.ClusterID = idString(o.clusterID)
	}
	p.settleNoSpace()
	// The lowest member version is the version the cluster as a whole runs.
	if n.minVersion != nil {
		c.Status.CurrentVersion = n.minVersion.String()
	}
	if t := c.Status.DowngradeTarget; t != "" && versions.MinorOf(c.Status.CurrentVersion) == t && !downgradeReported(o) {
		c.Status.DowngradeTarget = "" // every member runs the older minor: etcd ended the downgrade itself
	}
	c.Status.Replicas = n.voters
	// READY agrees with `kubectl get pods`: a member counts once etcd finds it healthy and its pod is Ready.
	c.Status.ReadyReplicas = n.servingVoters
	if sel, err := metav1.LabelSelectorAsSelector(naming.MemberSelector(c.Name)); err == nil {
		c.Status.Selector = sel.String()
	}
	c.Status.ObservedGeneration = c.Generation
	c.Status.Endpoints = etcdv1alpha1.Endpoints{
		ClientService:     fmt.Sprintf("%s:%d", naming.ClientServiceHost(c.Name, c.Namespace), naming.ClientPort),
		ClientServiceName: naming.ClientService(c.Name),
	}
	switch {
	case c.Spec.TLS.Client == etcdv1alpha1.TLSUserProvided:
		// The server Secret's ca.crt is the CA clients' certificates must chain to; users issue
		// their client certificates themselves.
		c.Status.Endpoints.CASecret = resources.ServerSecretName(c)
	case resources.ClientTLS(c):
		c.Status.Endpoints.CASecret = naming.CASecret(c.Name)
		c.Status.Endpoints.ClientSecret = naming.UserClientSecret(c.Name)
	}
}

// health is what the conditions and phase follow from (planner.Health).
func (p *pass) health(n memberCounts, action planner.Action) planner.Health {
	c, o := p.c, p.obs
	h := planner.Health{
		EtcdAnswered: o.etcd != nil, EtcdError: fmt.Sprint(o.etcdErr), Migrating: resources.Migrating(c), EtcdMembers: len(o.members),
		Voters: n.voters, HealthyVoters: n.healthyVoters, ServingVoters: n.servingVoters, Replicas: c.Spec.Replicas,
		Bootstrapped: c.Status.Bootstrapped, ClientService: naming.ClientService(c.Name), Paused: c.Spec.Maintenance.Paused,
		Recovering: shared.Recovering(c) != nil, Blocked: c.Status.UpgradeBlocked, CurrentVersion: c.Status.CurrentVersion, TargetVersion: c.Spec.Version,
		ClusterID: c.Status.ClusterID, WrongAnswers: o.wrongAnswers, Alarms: alarmMessage(o), VolumeRefusal: o.volumeRefusal,
		Slow: slowMessage(c, o), StorageSize: c.Spec.Storage.Size.String(),
		PrevDegraded: conditionReason(c, etcdv1alpha1.ConditionDegraded), PrevProgressing: conditionReason(c, etcdv1alpha1.ConditionProgressing),
	}
	if p.trust != nil {
		h.Trust = &planner.Problem{Why: p.trust.reason, Message: p.trust.message}
	}
	// Always asked: it also keeps the diverged-members metric.
	if why, msg := p.divergenceCondition(); msg != "" {
		h.Divergence = &planner.Problem{Why: why, Message: msg}
	}
	if action.Kind == planner.None {
		h.VolumesGrowing = p.volumesGrowing()
	}
	if r := c.Status.TLS.CARotation; r != nil {
		h.CARotation = &planner.CARotation{Phase: r.Phase, Trigger: r.Trigger}
	}
	return h
}

// availability is the Available condition: the planner's, given since when the passes have found
// the quorum out of reach (kept in memory) and whether Available was True before (planner.AvailabilityGrace).
func (p *pass) availability(h planner.Health) planner.Condition {
	now := planner.Availability(h)
	if now.Status || p.mem == nil {
		if p.mem != nil {
			p.mem.outOfReachSince = time.Time{}
		}
		return now
	}
	if p.mem.outOfReachSince.IsZero() {
		p.mem.outOfReachSince = p.now
	}
	h.WasAvailable = meta.IsStatusConditionTrue(p.c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
	h.OutOfReachFor = p.now.Sub(p.mem.outOfReachSince)
	return planner.Availability(h)
}

// conditionReason is the reason of the cluster's condition of type typ, "" when it has none.
func conditionReason(c *etcdv1alpha1.EtcdCluster, typ string) reason.Reason {
	if cond := meta.FindStatusCondition(c.Status.Conditions, typ); cond != nil {
		return reason.Reason(cond.Reason)
	}
	return ""
}

// recordSpread sets Spread from the nodes of the members' pods and the zones of those nodes; while a
// member has no pod on a node the last verdict stands (a member being re-created is not a change of
// placement). A new False verdict is also an event: a cluster that lost its spread (a replacement
// placed beside another member while a zone was down) stays Available, and nothing else says so.
// A zone move given up is said in the message while the rebalance backs off.
func (p *pass) recordSpread() {
	c, o := p.c, p.obs
	switch v := planner.Spread(membersNodes(c, o), o.zones); {
	case !v.Known:
	case v.Spread:
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionSpread, true, reason.MembersOnSeparateNodes, v.Message)
	case v.ByZone:
		shared.WarnOnTransition(p.r.Recorder, c, c.Status.Conditions, etcdv1alpha1.ConditionSpread, reason.MembersShareAZone, v.Message)
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionSpread, false, reason.MembersShareAZone, v.Message+rebalanceNote(c, p.now))
	default:
		shared.WarnOnTransition(p.r.Recorder, c, c.Status.Conditions, etcdv1alpha1.ConditionSpread, reason.MembersShareANode, v.Message)
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionSpread, false, reason.MembersShareANode, v.Message)
	}
}

// rebalanceNote says, while the zone rebalance backs off, which move was given up and until when.
func rebalanceNote(c *etcdv1alpha1.EtcdCluster, now time.Time) string {
	r := rebalanceInput(c)
	if !r.BackingOff(now) {
		return ""
	}
	return fmt.Sprintf("; moving %s into zone %s was given up at %s (%s: its pod found no node there, or did not start), no move is tried before %s",
		r.Member, r.Zone, r.GaveUp.UTC().Format(time.RFC3339), reason.ZoneRebalanceAbandoned, r.GaveUp.Add(planner.RebalanceBackoff).UTC().Format(time.RFC3339))
}

// reportFailingStep turns Degraded True (ActionFailing) while the step key of action has failed
// failingAfter times in a row, naming the step and its last error: a step retried for ever must not
// read as AsExpected. A verdict that says more (quorum lost, an alarm, certificates, a name
// conflict) stands; the generic member-health ones give way, since the failing step is why.
func (p *pass) reportFailingStep(key string, action planner.Action) {
	b := &p.mem.backoff
	if !b.failing(key) {
		return
	}
	if d := meta.FindStatusCondition(p.c.Status.Conditions, etcdv1alpha1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
		switch reason.Reason(d.Reason) {
		case reason.MembersUnhealthy, reason.EtcdUnreachable, reason.ActionFailing:
		default:
			return
		}
	}
	shared.SetCondition(&p.c.Status.Conditions, p.c.Generation, etcdv1alpha1.ConditionDegraded, true, reason.ActionFailing, fmt.Sprintf("step %s %v (%s: %s) has failed %d times in a row; last error: %s (retried with backoff)",
		action.Kind, action.Members, action.Reason, action.Message, b.failures, b.lastError))
}

// recordQuorumLoss sets the QuorumLost condition and says whether it is True. Waiting on a human
// (policy Manual, a survivor missing) or stuck is escalated with a Warning event, once per reason.
func (p *pass) recordQuorumLoss(action planner.Action, available bool) bool {
	c := p.c
	var prev *metav1.Condition
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumLost); cond != nil {
		before := *cond // shared.SetCondition below changes the condition in place
		prev = &before
	}
	switch {
	case shared.Recovering(c) != nil:
		r := shared.Recovering(c)
		from := r.Survivor
		if r.Source == planner.FromBackup {
			from = "EtcdBackup " + r.Backup
		}
		why := reason.Recovering
		if action.Reason == reason.RecoveryStuck {
			why = action.Reason
		}
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionQuorumLost, true, why, fmt.Sprintf("recovering from %s (%s, phase %s): %s", from, r.Source, r.Phase, action.Message))
	case action.Reason == reason.QuorumLost:
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionQuorumLost, true, action.Reason, action.Message)
	case prev != nil && prev.Status == metav1.ConditionTrue && available:
		msg := "quorum is back"
		if r := c.Status.Recovery; r != nil && r.CompletedAt != nil {
			msg = fmt.Sprintf("quorum is back: recovered %s at %s", r.Source, r.CompletedAt.UTC().Format(time.RFC3339))
		}
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionQuorumLost, false, reason.Recovered, msg)
	case prev == nil || prev.Status == metav1.ConditionTrue:
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionQuorumLost, false, reason.NoMajorityLost, "no majority of the voting members has lost its data")
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumLost)
	if cond.Status != metav1.ConditionTrue {
		return false
	}
	if action.Kind == planner.Wait && cond.Reason != string(reason.Recovering) && (prev == nil || prev.Reason != cond.Reason || prev.Status != cond.Status) {
		p.r.Recorder.Event(c, corev1.EventTypeWarning, cond.Reason, cond.Message)
	}
	return true
}

// alarmMessage says which alarms are raised where, and what they mean for users.
func alarmMessage(o *observation) string {
	var parts []string
	for _, a := range o.alarms {
		name := o.names[a.MemberID]
		if name == "" {
			name = idString(a.MemberID)
		}
		switch a.Type {
		case etcdclient.AlarmNoSpace:
			parts = append(parts, fmt.Sprintf("NOSPACE raised by %s: the database reached its quota and etcd refuses writes until it is compacted, defragmented and the alarm disarmed, or the quota (spec.etcd.quotaBackendBytes) raised", name))
		case etcdclient.AlarmCorrupt:
			parts = append(parts, fmt.Sprintf("CORRUPT raised on %s: its data differs from the other members'; it is replaced once it has been failing for spec.maintenance.replaceFailedMemberAfter", name))
		default:
			parts = append(parts, fmt.Sprintf("%s raised by %s", a.Type, name))
		}
	}
	return strings.Join(parts, "; ")
}

// downgradeReported says whether any member that answered reports an enabled downgrade.
func downgradeReported(o *observation) bool {
	for _, st := range o.status {
		if st.DowngradeTarget != "" {
			return true
		}
	}
	return false
}

// trackFailures keeps, per member, since when etcd has reported it failing (status.members[].unhealthySince),
// before the decision that may replace it. The clock runs only while the operator keeps seeing etcd:
// after a gap (operator down or partitioned, or the whole cluster silent) every member starts a
// fresh grace period, so nobody is removed on what one pass could not see. A pass that saw nothing
// of a member (the member list failed, or the leader's view of its peers could not be read) changes
// nothing: clearing the clock there postponed the replacement for as long as observations failed
// now and then. A member is forgotten only when a member list that answered leaves it out.
func (p *pass) trackFailures() {
	c, o := p.c, p.obs
	if o.etcd == nil {
		return // the gap, if it grows long, restarts the clocks when etcd answers again
	}
	continuous := p.mem.sawEtcd(p.now)
	for i := range c.Status.Members {
		ms := &c.Status.Members[i]
		id, inEtcd := o.ids[ms.Name]
		switch {
		case !inEtcd:
			ms.UnhealthySince = nil
		case o.failing[id] == "" && o.unjudged[id] && continuous:
			// No evidence either way this pass: the clock stands.
		case o.failing[id] == "":
			ms.UnhealthySince = nil
		case ms.UnhealthySince == nil || !continuous:
			t := metav1.NewTime(p.now)
			ms.UnhealthySince = &t
		}
	}
}

// updateLegacyWALIndex moves status.legacyWALIndex when this pass sees the last 3.5 member go. It runs
// before the decision, so that the pass seeing the change already holds the step to 3.7 back.
// Versions are per member: what it reports now, else what it last reported (a member that is down
// keeps counting with the version it last ran).
func (p *pass) updateLegacyWALIndex() {
	c, o := p.c, p.obs
	if o.etcd == nil {
		return
	}
	var before, now *versions.Version
	lower := func(low **versions.Version, s string) {
		if v, err := versions.Parse(s); err == nil && (*low == nil || v.Compare(**low) < 0) {
			*low = &v
		}
	}
	for _, m := range c.Status.Members {
		lower(&before, m.Version)
		current := m.Version
		if st, ok := o.status[o.ids[m.Name]]; ok && st.Version != "" {
			current = st.Version
		}
		lower(&now, current)
	}
	if before == nil || now == nil {
		return
	}
	var indexes []uint64
	for _, st := range o.status {
		indexes = append(indexes, st.RaftIndex)
	}
	c.Status.LegacyWALIndex = int64(planner.LegacyWALIndex(uint64(c.Status.LegacyWALIndex), before.String(), now.String(), indexes))
}
