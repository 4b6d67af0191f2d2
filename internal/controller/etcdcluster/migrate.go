package etcdcluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// migrationInput is the take-over under way for the planner, nil when there is none.
func (p *pass) migrationInput() *planner.Migration {
	c, o := p.c, p.obs
	if !resources.Migrating(c) {
		return nil
	}
	from := c.Spec.Bootstrap.MigrateFrom
	in := &planner.Migration{Endpoints: from.Endpoints, AuthEnabled: o.authEnabled, Quota: resources.Quota(c), StatefulSetProblem: o.oldStatefulSetProblem,
		SourceCA: from.CASecret != ""}
	if from.AdoptObjects {
		in.StatefulSet = from.StatefulSetName
	}
	if c.Spec.Etcd.QuotaBackendBytes == 0 && c.Status.QuotaBackendBytes == 0 {
		in.Quota = resources.DerivedQuota(c.Spec.Storage.Size.Value()) // what StartMigration records
	}
	if o.etcdErr != nil {
		in.Unreachable = o.etcdErr.Error()
	}
	if mg := c.Status.Migration; mg != nil {
		in.Started, in.ClusterID = true, parseID(mg.ClusterID)
		for _, s := range mg.SourceMembers {
			in.Source = append(in.Source, parseID(s.ID))
		}
	}
	return in
}

// actMigration records the start and the end of a take-over; the membership steps in between are
// the ordinary ones (AddLearner, Promote, MoveLeader, RemoveMember), each recorded before its call.
func (p *pass) actMigration(ctx context.Context, a planner.Action) error {
	c, o := p.c, p.obs
	switch a.Kind {
	case planner.StartMigration:
		// Recorded before the first member is added: from now on the old members are told apart from
		// the operator's by this list, and the quota the new members run with is fixed. The old
		// StatefulSet the preflight accepted (adoptObjects) is pinned by its UID in the same write, so
		// the deletion at the end can only hit that object.
		mg := &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationJoining, ClusterID: idString(o.clusterID), StartedAt: metav1.NewTime(p.now), StatefulSetUID: o.oldStatefulSetUID}
		for _, m := range o.members {
			mg.SourceMembers = append(mg.SourceMembers, etcdv1alpha1.SourceMember{ID: idString(m.ID), Name: m.Name, PeerURLs: m.PeerURLs})
		}
		c.Status.Migration = mg
		switch {
		case resources.PeerTLS(c) && resources.SourcePeerTLS(c):
			mg.PeerTLS = etcdv1alpha1.PeerTLSUpdating // the members join over TLS; only the peer check is left to tighten
		case resources.PeerTLS(c):
			mg.PeerTLS = etcdv1alpha1.PeerTLSPlain // the members join in the old members' plain text
		}
		if c.Status.ClusterToken == "" {
			c.Status.ClusterToken = resources.ClusterToken(c)
		}
		if c.Status.QuotaBackendBytes == 0 {
			c.Status.QuotaBackendBytes = resources.DerivedQuota(c.Spec.Storage.Size.Value())
		}
		if err := p.writeStatus(ctx); err != nil {
			return err
		}
		failpoint.Hit(failpoint.AfterMigrationStart)
		return nil

	case planner.CompleteMigration:
		done := metav1.NewTime(p.now)
		c.Status.Migration.Phase, c.Status.Migration.CompletedAt = etcdv1alpha1.MigrationComplete, &done
		// From now on the cluster is the operator's like any other: every (re)start joins it.
		c.Status.Bootstrapped = true
		return p.writeStatus(ctx)

	case planner.StartPeerTLS:
		c.Status.Migration.PeerTLS = etcdv1alpha1.PeerTLSUpdating
		return p.writeStatus(ctx)

	case planner.UpdatePeerURLs:
		// Recorded (Updating) before the first; each member already listens for TLS on the peer port,
		// so the others reconnect to it there. Repeating an update that was made changes nothing.
		if err := o.etcd.UpdatePeerURLs(ctx, a.ID, naming.PeerURL(c.Name, c.Namespace, a.Members[0], true)); err != nil {
			return err
		}
		failpoint.Hit(failpoint.AfterPeerURLUpdate)
		return nil

	case planner.DeleteOldStatefulSet:
		return p.deleteOldStatefulSet(ctx, a.Members[0])

	case planner.SecurePeers:
		// A new ConfigHash: the members are rolled one at a time without the plain-text listener.
		c.Status.Migration.PeerTLS = etcdv1alpha1.PeerTLSSecured
		return p.writeStatus(ctx)
	}
	return fmt.Errorf("no handler for action %s", a.Kind)
}

// oldStatefulSet is the StatefulSet to delete after a take-over with adoptObjects, "" when there
// is none (left).
func oldStatefulSet(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.MigrateFrom == nil || !c.Spec.Bootstrap.MigrateFrom.AdoptObjects {
		return ""
	}
	if mg := c.Status.Migration; mg == nil || mg.Phase != etcdv1alpha1.MigrationComplete || mg.StatefulSetDeleted || mg.StatefulSetKept != "" {
		return ""
	}
	return c.Spec.Bootstrap.MigrateFrom.StatefulSetName
}

// readOldStatefulSet reads migrateFrom.statefulSetName past the cache: the operator watches no
// StatefulSets, and reads this one only before the start and before its deletion.
func (p *pass) readOldStatefulSet(ctx context.Context) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := p.r.apiReader.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: p.c.Spec.Bootstrap.MigrateFrom.StatefulSetName}, sts)
	return sts, err
}

// oldStatefulSetProblem says why migrateFrom.adoptObjects cannot take the named StatefulSet, "" if
// it can, with its UID: it must exist here and be plain, not controlled by another object (an old
// operator's cluster would make it again, and fight the operator over its members).
func (p *pass) oldStatefulSetProblem(ctx context.Context) (types.UID, string) {
	name := p.c.Spec.Bootstrap.MigrateFrom.StatefulSetName
	sts, err := p.readOldStatefulSet(ctx)
	if apierrors.IsNotFound(err) {
		return "", fmt.Sprintf("StatefulSet %s is not in namespace %s: name the StatefulSet that runs the old members", name, p.c.Namespace)
	}
	if err != nil {
		return "", fmt.Sprintf("StatefulSet %s cannot be read: %v", name, err)
	}
	if owner := metav1.GetControllerOf(sts); owner != nil {
		return "", fmt.Sprintf("StatefulSet %s is controlled by %s %s, which would make it again: stop that controller's cluster yourself after the migration, and migrate without adoptObjects", name, owner.Kind, owner.Name)
	}
	if sts.DeletionTimestamp != nil {
		return "", fmt.Sprintf("StatefulSet %s is being deleted", name)
	}
	return sts.UID, ""
}

// deleteOldStatefulSet deletes the old members' StatefulSet after a take-over with adoptObjects:
// every old member is out of the cluster (the migration is Complete), so its pods are no members
// any more. The deletion is conditional on the UID the preflight recorded: a StatefulSet made
// again under the same name since (by hand, a script, a GitOps tool) is another object, which the
// user never handed over, and is left alone for good. Deleting again after a crash finds nothing,
// which is done too.
func (p *pass) deleteOldStatefulSet(ctx context.Context, name string) error {
	c := p.c
	mg := c.Status.Migration
	if mg.StatefulSetUID == "" {
		// The migration was started by an operator that recorded no UID. The StatefulSet is taken as
		// it is now, if the preflight's rules still accept it: one controlled by another object would
		// be made again by it, and the preflight would have refused it. Its UID is recorded before the
		// deletion, so a replacement made from here on, even across a crash, is left alone; one made
		// before now cannot be told from the original, which is the gap the recorded UID closes.
		// Being deleted already is no reason to stop here: that is where this step leads anyway.
		sts, err := p.readOldStatefulSet(ctx)
		if apierrors.IsNotFound(err) {
			return p.oldStatefulSetDeleted(ctx, name)
		}
		if err != nil {
			return fmt.Errorf("read the old StatefulSet %s: %w", name, err)
		}
		if owner := metav1.GetControllerOf(sts); owner != nil {
			return p.keepOldStatefulSet(ctx, etcdv1alpha1.StatefulSetControlled, fmt.Sprintf("StatefulSet %s is now controlled by %s %s, which would make it again: the operator left it alone (migrateFrom.adoptObjects) and does not try again; stop that controller's cluster yourself", name, owner.Kind, owner.Name))
		}
		mg.StatefulSetUID = sts.UID
		if err := p.writeStatus(ctx); err != nil {
			return err
		}
	}
	uid := mg.StatefulSetUID
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	err := p.r.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsConflict(err):
		// The UID precondition failed: not the StatefulSet checked before the start. Not returned as
		// an error, which would be retried (Conflict is "a stale view, look again") without end.
		return p.keepOldStatefulSet(ctx, etcdv1alpha1.StatefulSetReplaced, fmt.Sprintf("StatefulSet %s was replaced by another object since it was checked before the take-over (UID %s): the operator left it alone (migrateFrom.adoptObjects) and does not try again; delete it yourself if it runs the old members", name, uid))
	case apierrors.IsNotFound(err):
		// Deleted already: by a pass that crashed before recording it, or by the user.
	case err != nil:
		return fmt.Errorf("delete the old StatefulSet %s (UID %s): %w", name, uid, err)
	}
	return p.oldStatefulSetDeleted(ctx, name)
}

// oldStatefulSetDeleted records that the old StatefulSet is gone, and says so.
func (p *pass) oldStatefulSetDeleted(ctx context.Context, name string) error {
	p.r.Recorder.Eventf(p.c, corev1.EventTypeNormal, string(reason.Migrated), "deleted the old members' StatefulSet %s and so its pods (migrateFrom.adoptObjects); its volumes and Services are kept: delete them once you no longer need them", name)
	p.c.Status.Migration.StatefulSetDeleted = true
	return p.writeStatus(ctx)
}

// keepOldStatefulSet records that the old StatefulSet is left alone, why (kept), and says so (msg).
func (p *pass) keepOldStatefulSet(ctx context.Context, kept, msg string) error {
	p.r.Recorder.Event(p.c, corev1.EventTypeWarning, string(reason.OldStatefulSetKept), msg)
	p.c.Status.Migration.StatefulSetKept = kept
	return p.writeStatus(ctx)
}

// otherPeers are the --initial-cluster entries of the members the operator does not run: a member
// joining a cluster must name every member in the member list.
func (p *pass) otherPeers() []string {
	var out []string
	for _, m := range p.obs.members {
		if !p.obs.foreign[m.ID] {
			continue
		}
		name := m.Name
		if name == "" {
			name = idString(m.ID)
		}
		for _, u := range m.PeerURLs {
			out = append(out, name+"="+u)
		}
	}
	return out
}

// peerURLs are the peer URLs etcd has for the operator's members (the first of each), which a
// member joining must name them by.
func (o *observation) peerURLs() map[string]string {
	out := map[string]string{}
	for _, m := range o.members {
		if n := o.names[m.ID]; n != "" && !o.foreign[m.ID] && len(m.PeerURLs) > 0 {
			out[n] = m.PeerURLs[0]
		}
	}
	return out
}

// peerTLSInput is the move of the peer URLs to TLS after a take-over, nil when there is none.
func (p *pass) peerTLSInput() *planner.PeerTLSMove {
	c := p.c
	if resources.Migrating(c) || !resources.PeerTLSUnsettled(c) || c.Status.Migration == nil {
		return nil
	}
	return &planner.PeerTLSMove{Phase: c.Status.Migration.PeerTLS, FromTLS: resources.SourcePeerTLS(c), Want: func(name string) string {
		return naming.PeerURL(c.Name, c.Namespace, name, true)
	}}
}

// leaderEndpoint is where to ask the leader to hand over: its pod, or, for an old member of a
// cluster being taken over, the given endpoint it answered at, else the client URL it advertises.
func (p *pass) leaderEndpoint() (string, error) {
	o := p.obs
	if o.foreign[o.leaderID] {
		if ep := o.sourceAt[o.leaderID]; ep != "" {
			return ep, nil
		}
		for _, m := range o.members {
			if m.ID == o.leaderID && len(m.ClientURLs) > 0 {
				return m.ClientURLs[0], nil
			}
		}
		return "", fmt.Errorf("old member %x leads but advertises no client URL", o.leaderID)
	}
	leader := o.pods[o.names[o.leaderID]]
	if leader == nil || p.endpoint(leader) == "" {
		return "", fmt.Errorf("leader %x has no reachable pod", o.leaderID)
	}
	return p.endpoint(leader), nil
}

// oldSideAfterMigration says what is left to do on the old side once a take-over is complete.
func oldSideAfterMigration(from *etcdv1alpha1.MigrateFromSpec, mg *etcdv1alpha1.Migration) string {
	if !from.AdoptObjects {
		return "Scale the old StatefulSet (or the old operator's cluster) to 0 and delete it and its volumes: its members are out of the cluster"
	}
	sts := from.StatefulSetName
	switch mg.StatefulSetKept {
	case etcdv1alpha1.StatefulSetReplaced:
		return fmt.Sprintf("The old members are out of the cluster, but StatefulSet %s was replaced by another object since it was checked before the take-over: the operator left it alone (status.migration.statefulSetKept: Replaced); delete it yourself if it runs the old members, and the old volumes and Services once you no longer need them", sts)
	case etcdv1alpha1.StatefulSetControlled:
		return fmt.Sprintf("The old members are out of the cluster, but StatefulSet %s is controlled by another object, which would make it again: the operator left it alone (status.migration.statefulSetKept: Controlled); stop that controller's cluster yourself, and delete the old volumes and Services once you no longer need them", sts)
	}
	return fmt.Sprintf("The old members are out of the cluster and the operator deletes their StatefulSet %s (adoptObjects; status.migration.statefulSetDeleted); delete its volumes and Services once you no longer need them", sts)
}

// recordMigration sets the Migrated condition of a cluster with spec.bootstrap.migrateFrom, and
// announces the end once, with where clients go now.
func (p *pass) recordMigration(action planner.Action) {
	c := p.c
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.MigrateFrom == nil {
		return
	}
	if mg := c.Status.Migration; mg != nil && mg.Phase == etcdv1alpha1.MigrationComplete {
		msg := fmt.Sprintf("cluster %s runs on this EtcdCluster's members only; clients connect to %s. ", mg.ClusterID, c.Status.Endpoints.ClientService) +
			oldSideAfterMigration(c.Spec.Bootstrap.MigrateFrom, mg)
		if ca := resources.SourceCASecret(c); ca != "" {
			msg += fmt.Sprintf(". Client certificates of the running cluster's CA (from Secret %s) keep working; to move to a CA of the operator's own once every client uses Secret %s, annotate %s", ca, c.Status.Endpoints.ClientSecret, naming.AnnotationRotateCA)
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionMigrated) {
			p.r.Recorder.Event(c, corev1.EventTypeNormal, string(reason.Migrated), msg)
		}
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionMigrated, true, reason.Migrated, msg)
		return
	}
	if stop, ok := reason.MigrationStops[action.Reason]; ok {
		// Announced once, when the condition arrives at the stop; the condition holds it meanwhile.
		shared.WarnOnTransition(p.r.Recorder, c, c.Status.Conditions, stop.Condition, action.Reason, action.Message)
		shared.SetCondition(&c.Status.Conditions, c.Generation, stop.Condition, false, action.Reason, action.Message)
		return
	}
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionMigrated, false, reason.Migrating, fmt.Sprintf("%s; keep the old members running and clients on them until this condition is True (new endpoint: %s)",
		action.Message, naming.ClientServiceHost(c.Name, c.Namespace)))
}
