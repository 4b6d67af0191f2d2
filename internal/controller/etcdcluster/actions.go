package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// act takes one step. Every irreversible etcd call is preceded by a status write that records it
// (status.pendingOperation), so a crash right after the call is recognised on the next pass.
func (p *pass) act(ctx context.Context, a planner.Action) error {
	h, ok := actionHandlers[a.Kind]
	if !ok {
		return fmt.Errorf("no handler for action %s", a.Kind)
	}
	return h(p, ctx, a)
}

// actionHandler takes one step of a kind.
type actionHandler func(p *pass, ctx context.Context, a planner.Action) error

// actionHandlers has one handler per kind of step the planner decides (None and Wait take none).
var actionHandlers = map[planner.Kind]actionHandler{
	planner.InitBootstrap:        (*pass).actInitBootstrap,
	planner.Compact:              (*pass).actCompact,
	planner.Defragment:           (*pass).actDefragment,
	planner.DisarmNoSpace:        (*pass).actDisarmNoSpace,
	planner.DisarmAlarms:         (*pass).actDisarmAlarms,
	planner.ExpandVolume:         (*pass).actExpandVolume,
	planner.Retune:               (*pass).actRetune,
	planner.AdvanceCARotation:    (*pass).actAdvanceCARotation,
	planner.RaiseQuota:           (*pass).actRaiseQuota,
	planner.StartMigration:       (*pass).actMigration,
	planner.CompleteMigration:    (*pass).actMigration,
	planner.DeleteOldStatefulSet: (*pass).actMigration,
	planner.StartPeerTLS:         (*pass).actMigration,
	planner.UpdatePeerURLs:       (*pass).actMigration,
	planner.SecurePeers:          (*pass).actMigration,
	planner.StartRecovery:        (*pass).actStartRecovery,
	planner.StopMembers:          (*pass).actStopMembers,
	planner.FenceMembers:         (*pass).actFenceMembers,
	planner.AdvanceRecovery:      (*pass).actAdvanceRecovery,
	planner.RestartFromBackup:    (*pass).actRestartFromBackup,
	planner.FinishRecovery:       (*pass).actFinishRecovery,
	planner.CreateMembers:        (*pass).actCreateMembers,
	planner.RollMember:           (*pass).actRollMember,
	planner.EnableDowngrade:      (*pass).actEnableDowngrade,
	planner.CancelDowngrade:      (*pass).actCancelDowngrade,
	planner.AdvanceLog:           (*pass).actAdvanceLog,
	planner.AdoptPod:             (*pass).actAdoptPod,
	planner.MarkBootstrapped:     (*pass).actMarkBootstrapped,
	planner.AddLearner:           (*pass).actAddLearner,
	planner.FinishAdd:            (*pass).actFinishAdd,
	planner.Promote:              (*pass).actPromote,
	planner.MoveLeader:           (*pass).actMoveLeader,
	planner.RemoveMember:         (*pass).actRemoveMember,
	planner.DeleteStrayObject:    (*pass).actDeleteStrayObject,
	planner.FinishRemove:         (*pass).actForgetMember,
	planner.ForgetMember:         (*pass).actForgetMember,
	planner.DropPending:          (*pass).actDropPending,
	planner.DeletePod:            (*pass).actDeletePod,
}

func (p *pass) actInitBootstrap(ctx context.Context, a planner.Action) error {
	c := p.c
	c.Status.Members = nil
	for _, m := range a.Members {
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: m})
	}
	// After the last name given: a cluster rebuilt from a backup starts past its old members.
	c.Status.NextMemberIndex = memberIndex(c.Name, a.Members[len(a.Members)-1]) + 1
	if c.Status.ClusterToken == "" {
		c.Status.ClusterToken = resources.ClusterToken(c)
	}
	if c.Status.QuotaBackendBytes == 0 {
		c.Status.QuotaBackendBytes = resources.DerivedQuota(c.Spec.Storage.Size.Value())
	}
	return p.writeStatus(ctx)
}

func (p *pass) actCompact(ctx context.Context, a planner.Action) error {
	c := p.c
	if err := p.obs.etcd.Compact(ctx, a.Revision); err != nil {
		return err
	}
	// Recorded after the call: a crash before the record only compacts again (harmless, and
	// nothing was defragmented since); recorded before, a compaction that never ran would be
	// taken for done.
	c.Status.NoSpace = &etcdv1alpha1.NoSpaceCleanup{CompactedRevision: a.Revision}
	return p.writeStatus(ctx)
}

func (p *pass) actDefragment(ctx context.Context, a planner.Action) error {
	c := p.c
	pod := p.obs.pods[a.Members[0]]
	if pod == nil || p.endpoint(pod) == "" {
		return fmt.Errorf("member %s has no running pod", a.Members[0])
	}
	if err := p.obs.at(p.endpoint(pod)).Defragment(ctx, p.endpoint(pod)); err != nil {
		return err
	}
	failpoint.Hit(failpoint.AfterDefragment)
	p.mem.defrag.defragmented(a.Members[0])
	// Recorded after the call: a crash in between defragments this member once more (time, not
	// data), and the members recorded before it are not done again.
	if ns := c.Status.NoSpace; ns != nil && !slices.Contains(ns.Defragmented, a.Members[0]) {
		ns.Defragmented = append(ns.Defragmented, a.Members[0])
		return p.writeStatus(ctx)
	}
	return nil
}

func (p *pass) actDisarmNoSpace(ctx context.Context, a planner.Action) error {
	return p.obs.etcd.Disarm(ctx, etcdclient.AlarmNoSpace)
}

func (p *pass) actDisarmAlarms(ctx context.Context, a planner.Action) error {
	return p.obs.etcd.DisarmMemberAlarms(ctx, a.ID)
}

func (p *pass) actExpandVolume(ctx context.Context, a planner.Action) error {
	return p.expandVolume(ctx, a.Members[0])
}

func (p *pass) actRetune(ctx context.Context, a planner.Action) error {
	c := p.c
	// Recorded first, like any configuration change: the members are then rolled with it.
	recordTuning(c, a.Tuning, p.now)
	return p.writeStatus(ctx)
}

func (p *pass) actAdvanceCARotation(ctx context.Context, a planner.Action) error {
	// Recorded before the next pass writes the certificates of the next phase and restarts the
	// members with them.
	p.advanceCARotation(a.Phase)
	return p.writeStatus(ctx)
}

func (p *pass) actRaiseQuota(ctx context.Context, a planner.Action) error {
	c := p.c
	// Recorded first: the members are then rolled with it, as for any configuration change.
	c.Status.QuotaBackendBytes = a.Quota
	return p.writeStatus(ctx)
}

func (p *pass) actCreateMembers(ctx context.Context, a planner.Action) error {
	c := p.c
	image := c.Spec.Image
	if image == "" {
		var err error
		if image, err = versions.Image(a.Version); err != nil {
			return err
		}
	}
	initial := p.initialCluster(a.Bootstrap)
	var others []string
	var peerURLs map[string]string
	if !a.Bootstrap && p.obs.etcd != nil {
		others, peerURLs = p.otherPeers(), p.obs.peerURLs()
	}
	var restore *resources.RestoreInput
	if a.Bootstrap {
		var err error
		if restore, err = p.restoreInput(ctx); err != nil {
			shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionRestored, false, reason.BackupNotReady, err.Error())
			return err
		}
	}
	for _, m := range a.Members {
		in := resources.MemberPodInput{Member: m, Image: image, Version: a.Version, InitialCluster: initial, PeerURLs: peerURLs, OtherPeers: others, Bootstrap: a.Bootstrap, Restore: restore, ForceNewCluster: a.ForceNewCluster, OperatorImage: p.r.OperatorImage, IDs: p.r.PodIDs, Contained: contained(c, m), Zone: memberZone(c, m), Certificates: p.certificates}
		if err := p.createMember(ctx, in); err != nil {
			return err
		}
	}
	if a.ForceNewCluster {
		failpoint.Hit(failpoint.AfterForceNewCluster)
	}
	return nil
}

func (p *pass) actRollMember(ctx context.Context, a planner.Action) error {
	c := p.c
	pod := p.obs.pods[a.Members[0]]
	if pod == nil {
		return nil
	}
	if a.Reason == reason.UpgradeFailed {
		c.Status.UpgradeBlocked = &etcdv1alpha1.UpgradeBlock{Version: pod.Labels[naming.LabelVersion], Target: c.Spec.Version, Member: a.Members[0]}
		if err := p.writeStatus(ctx); err != nil {
			return err
		}
	}
	return p.deleteObserved(ctx, pod)
}

func (p *pass) actEnableDowngrade(ctx context.Context, a planner.Action) error {
	c := p.c
	// Recorded first: if spec.version goes back up before members report the downgrade (or they
	// run 3.5, which never reports one), the record is what gets it cancelled.
	c.Status.DowngradeTarget = a.Version
	if err := p.writeStatus(ctx); err != nil {
		return err
	}
	// Idempotent in etcd: enabling the same target again is refused only if a different one is set.
	return p.obs.etcd.EnableDowngrade(ctx, a.Version)
}

func (p *pass) actCancelDowngrade(ctx context.Context, a planner.Action) error {
	c := p.c
	if err := p.obs.etcd.CancelDowngrade(ctx); err != nil {
		return err
	}
	c.Status.DowngradeTarget = ""
	return p.writeStatus(ctx)
}

func (p *pass) actAdvanceLog(ctx context.Context, a planner.Action) error {
	// Bounded per pass so a huge snapshot-count never holds a reconcile for long; the next pass
	// observes the new applied indexes and appends the rest.
	return p.obs.etcd.AdvanceLog(ctx, int(min(a.Count, maxAdvancePerPass)))
}

func (p *pass) actAdoptPod(ctx context.Context, a planner.Action) error {
	c := p.c
	pod := p.obs.pods[a.Members[0]]
	if pod == nil {
		return nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[naming.AnnotationConfigHash] = resources.ConfigHash(c)
	return p.r.Patch(ctx, pod, patch)
}

func (p *pass) actMarkBootstrapped(ctx context.Context, a planner.Action) error {
	c := p.c
	c.Status.Bootstrapped = true
	completeRecovery(c, metav1.NewTime(p.now)) // a cluster rebuilt from a backup is back
	return p.writeStatus(ctx)
}

func (p *pass) actAddLearner(ctx context.Context, a planner.Action) error {
	c := p.c
	name := a.Members[0]
	if !hasMember(c, name) {
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: name})
	}
	if idx := memberIndex(c.Name, name); idx >= c.Status.NextMemberIndex {
		c.Status.NextMemberIndex = idx + 1
	}
	c.Status.PendingOperation = &etcdv1alpha1.PendingOperation{Type: etcdv1alpha1.PendingAddMember, Member: name, Reason: string(a.Reason), Message: truncate(a.Message, 1024)}
	recordRebalance(c, a, p.now)
	if err := p.writeStatus(ctx); err != nil {
		return err
	}
	added, err := p.obs.etcd.AddLearner(ctx, resources.MemberPeerURL(c, name))
	if errors.Is(err, etcdclient.ErrPeersNotSettled) {
		return notYet{err} // the recorded addition is retried by the next passes
	}
	if err != nil {
		return err
	}
	failpoint.Hit(failpoint.AfterMemberAdd)
	c.Status.PendingOperation = nil
	setMemberID(c, name, added.ID)
	return p.writeStatus(ctx)
}

func (p *pass) actFinishAdd(ctx context.Context, a planner.Action) error {
	c := p.c
	c.Status.PendingOperation = nil
	setMemberID(c, a.Members[0], a.ID)
	return p.writeStatus(ctx)
}

func (p *pass) actPromote(ctx context.Context, a planner.Action) error {
	err := p.obs.etcd.Promote(ctx, a.ID)
	if errors.Is(err, etcdclient.ErrLearnerNotReady) {
		return notYet{err} // etcd's own catch-up check
	}
	if err != nil {
		return err
	}
	failpoint.Hit(failpoint.AfterPromote)
	return nil
}

func (p *pass) actMoveLeader(ctx context.Context, a planner.Action) error {
	ep, err := p.leaderEndpoint()
	if err != nil {
		return err
	}
	return p.obs.at(ep).MoveLeader(ctx, ep, a.ID)
}

func (p *pass) actRemoveMember(ctx context.Context, a planner.Action) error {
	c := p.c
	name := a.Members[0]
	c.Status.PendingOperation = &etcdv1alpha1.PendingOperation{Type: etcdv1alpha1.PendingRemoveMember, Member: name, ID: idString(a.ID), Reason: string(a.Reason), Message: truncate(a.Message, 1024)}
	recordRebalance(c, a, p.now)
	if err := p.writeStatus(ctx); err != nil {
		return err
	}
	if err := p.removeMember(ctx, a.ID); err != nil {
		return err
	}
	if p.obs.foreign[a.ID] {
		failpoint.Hit(failpoint.AfterOldMemberRemove)
	}
	failpoint.Hit(failpoint.AfterMemberRemove)
	return p.forget(ctx, name)
}

// removeMember asks the members of removalEndpoints, one at a time, to remove member id, until one
// does not refuse it under etcd's strict reconfiguration check (one member's view of its peers can
// stay stale for good while another's is fresh); any other error may mean the removal was proposed,
// so it ends the attempt. With no such member answering, the cluster's client asks whichever it reaches.
func (p *pass) removeMember(ctx context.Context, id uint64) error {
	vias := p.obs.removalEndpoints(id)
	if len(vias) == 0 {
		return p.obs.etcd.Remove(ctx, id)
	}
	var err error
	for _, ep := range vias {
		if err = p.obs.at(ep).RemoveAt(ctx, ep, id); !etcdclient.Refused(err) {
			return err
		}
	}
	return err
}

func (p *pass) actDeleteStrayObject(ctx context.Context, a planner.Action) error {
	return p.deleteMemberObjects(ctx, a.Members[0])
}

func (p *pass) actForgetMember(ctx context.Context, a planner.Action) error {
	return p.forget(ctx, a.Members[0])
}

func (p *pass) actDropPending(ctx context.Context, a planner.Action) error {
	if pd := p.c.Status.PendingOperation; pd != nil && pd.Member == a.Members[0] {
		p.c.Status.PendingOperation = nil
	}
	return p.writeStatus(ctx)
}

// actDeletePod deletes a pod the kubelet declared terminal (planner.DeletePod): none of its
// containers runs or will run again, so no grace period is owed, and its name is free for the next
// pod at once rather than after the kubelet's teardown of its sandbox and volumes.
func (p *pass) actDeletePod(ctx context.Context, a planner.Action) error {
	if pod := p.obs.pods[a.Members[0]]; pod != nil {
		return p.deleteObserved(ctx, pod, client.GracePeriodSeconds(0))
	}
	return nil
}

// notYet is etcd declining a step for a reason that clears by itself within seconds (a learner
// catching up, a member connected to its peers for less than etcd's health interval). Nothing failed:
// the step is tried again at the busy pace, without the escalating backoff and the ActionFailed event
// of a failure (a backoff of 1 s, then 2 s, then 4 s cost seconds on every replacement right after a
// member restart), and without the event of a step taken.
type notYet struct{ err error }

func (e notYet) Error() string { return e.err.Error() }
func (e notYet) Unwrap() error { return e.err }

// maxAdvancePerPass bounds the raft entries one AdvanceLog pass appends (a few seconds of work).
const maxAdvancePerPass = 20000

// initialCluster is the --initial-cluster list for new pods: the initial members while
// bootstrapping, else etcd's current member list (which a joining member must match exactly).
func (p *pass) initialCluster(bootstrap bool) []string {
	var out []string
	if bootstrap || p.obs.etcd == nil {
		for _, m := range p.c.Status.Members {
			out = append(out, m.Name)
		}
		return out
	}
	for _, m := range p.obs.members {
		if n := p.obs.names[m.ID]; n != "" && !p.obs.foreign[m.ID] {
			out = append(out, n)
		}
	}
	return out
}

func (p *pass) createMember(ctx context.Context, in resources.MemberPodInput) error {
	c, member := p.c, in.Member
	if c.Spec.Storage.Medium != etcdv1alpha1.StorageMediumMemory && p.obs.pvcs[member] == nil {
		if _, err := p.createOrUpdateOwned(ctx, resources.MemberPVC(c, member), nil); err != nil {
			return fmt.Errorf("create PVC of %s: %w", member, err)
		}
	}
	if p.obs.pods[member] != nil {
		return nil
	}
	svc, key := &corev1.Service{}, client.ObjectKey{Namespace: c.Namespace, Name: naming.ClientService(c.Name)}
	err := p.r.Get(ctx, key, svc)
	if apierrors.IsNotFound(err) {
		err = p.r.apiReader.Get(ctx, key, svc) // made by this pass: not in the cache yet
	}
	if err != nil {
		return fmt.Errorf("read the client Service for the IP family of %s: %w", member, err)
	}
	// Pods get addresses of the cluster's primary family, which is the first of a Service's by default.
	in.IPv6 = len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	in.VolumePlaced = p.obs.pvcs[member] != nil && p.obs.pvcs[member].Spec.VolumeName != ""
	if _, err := p.createOrUpdateOwned(ctx, resources.MemberPod(c, in), nil); err != nil {
		return fmt.Errorf("create pod of %s: %w", member, err)
	}
	failpoint.Hit(failpoint.AfterPodCreate)
	return nil
}

// forget deletes a member's pod and PVC and drops it from status, ending any pending operation on it.
func (p *pass) forget(ctx context.Context, member string) error {
	if err := p.deleteMemberObjects(ctx, member); err != nil {
		return err
	}
	c := p.c
	kept := c.Status.Members[:0:0]
	for _, m := range c.Status.Members {
		if m.Name != member {
			kept = append(kept, m)
		}
	}
	c.Status.Members = kept
	if pd := c.Status.PendingOperation; pd != nil && pd.Member == member {
		if r := c.Status.ZoneRebalance; pd.Type == etcdv1alpha1.PendingRemoveMember && pd.Reason == string(reason.RebalancingZones) && r != nil {
			// The end of a zone move (Spread may have turned True already, once the new member was
			// placed), said here whether the removal returned or was found done on a later pass: etcd
			// may answer a member's removal of itself with an error after applying it.
			p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.ZonesRebalanced), "%s votes in zone %s and %s is removed: the zone move is over", r.Member, r.Zone, member)
		}
		c.Status.PendingOperation = nil
	}
	if r := c.Status.ZoneRebalance; r != nil && r.Member == member && r.FinishedAt == nil && r.GaveUpAt == nil {
		// The move's member is gone before the move ended (its addition was dropped, or its data
		// lost): the move did not happen, and nothing holds the next one back.
		c.Status.ZoneRebalance = nil
	}
	return p.writeStatus(ctx)
}

// deleteMemberObjects deletes the pod, then the PVC, observed under a member's name.
func (p *pass) deleteMemberObjects(ctx context.Context, member string) error {
	if pod := p.obs.pods[member]; pod != nil {
		if err := p.deleteObserved(ctx, pod); err != nil {
			return err
		}
	}
	if pvc := p.obs.pvcs[member]; pvc != nil {
		return p.deleteObserved(ctx, pvc)
	}
	return nil
}

// deleteObserved deletes exactly the object this pass observed (UID precondition), never a
// namesake created since.
func (p *pass) deleteObserved(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	uid := obj.GetUID()
	if err := p.r.Delete(ctx, obj, append(opts, client.Preconditions{UID: &uid})...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return nil
}

func hasMember(c *etcdv1alpha1.EtcdCluster, name string) bool {
	for _, m := range c.Status.Members {
		if m.Name == name {
			return true
		}
	}
	return false
}

func setMemberID(c *etcdv1alpha1.EtcdCluster, name string, id uint64) {
	for i := range c.Status.Members {
		if c.Status.Members[i].Name == name {
			c.Status.Members[i].ID = idString(id)
		}
	}
}

// memberIndex is the number at the end of a member name made by naming.MemberName.
func memberIndex(cluster, member string) int32 {
	var idx int32
	if _, err := fmt.Sscanf(member[len(cluster):], "-%d", &idx); err != nil {
		return -1
	}
	return idx
}

// truncate keeps a message within the n bytes a status field allows, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
