package etcdcluster

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// observeSurvivors asks every running member what it knows of itself while none answers a
// linearizable call: its status (leader, committed and applied index) and its own view of the membership. These
// calls need no quorum; they are the evidence a quorum-loss recovery is decided on.
func (p *pass) observeSurvivors(ctx context.Context, cl *etcdclient.Client, o *observation) {
	if !p.c.Status.Bootstrapped {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		ep := p.endpoint(o.pods[name])
		if ep == "" {
			continue
		}
		st, err := cl.Status(ctx, ep)
		if err != nil {
			log.FromContext(ctx).V(1).Info("member does not answer", "member", name, "error", err.Error())
			continue
		}
		local, err := cl.LocalMemberList(ctx, ep)
		if err != nil {
			log.FromContext(ctx).V(1).Info("member does not list its members", "member", name, "error", err.Error())
			continue
		}
		s := planner.Survivor{Name: name, ID: st.ID, Leader: st.Leader, Learner: st.IsLearner,
			CommittedIndex: st.RaftIndex, AppliedIndex: st.RaftAppliedIndex}
		for _, m := range local {
			s.Members = append(s.Members, planner.EtcdMember{ID: m.ID, Name: memberNameFromPeerURLs(p.c, m.PeerURLs), Learner: m.IsLearner, Started: m.Started()})
		}
		o.survivors = append(o.survivors, s)
	}
}

// settleRecoveryRequest reads the manual trigger (planner.RecoverAnnotation) and applies
// planner.SettleRecoveryRequest: it returns the source to recover from, or "", and removes a request
// that cannot apply, with an event saying why, or whose recovery is under way.
func (p *pass) settleRecoveryRequest(ctx context.Context) (string, error) {
	c := p.c
	v, ok := c.Annotations[planner.RecoverAnnotation]
	if !ok {
		return "", nil
	}
	s := planner.SettleRecoveryRequest(v, shared.Recovering(c) != nil, p.obs.etcd != nil)
	switch s.Outcome {
	case planner.RequestStands:
		return s.Request, nil
	case planner.RequestRefused:
		p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.RecoveryRequestIgnored), s.Message)
	}
	return "", p.dropRecoveryRequest(ctx)
}

func (p *pass) dropRecoveryRequest(ctx context.Context) error {
	return p.dropAnnotation(ctx, planner.RecoverAnnotation)
}

// newestBackup is the EtcdBackup a FromBackup recovery restores: the newest verified successful
// backup of this cluster, else the newest successful one, never one marked corrupt; only backups
// completed after the cluster was created (a namesake's backups are not its data). note says which
// newer backups were passed over as corrupt.
func (p *pass) newestBackup(ctx context.Context) (name, note string, err error) {
	c := p.c
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := p.r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return "", "", fmt.Errorf("list backups: %w", err)
	}
	schedules := &etcdv1alpha1.EtcdBackupScheduleList{}
	if err := p.r.List(ctx, schedules, client.InNamespace(c.Namespace)); err != nil {
		return "", "", fmt.Errorf("list backup schedules: %w", err)
	}
	choice := pickBackup(c, list.Items, schedules.Items)
	return choice.Name, choice.Note, nil
}

// pickBackup is newestBackup's choice among backups, with schedules telling which were verified.
func pickBackup(c *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup, schedules []etcdv1alpha1.EtcdBackupSchedule) planner.BackupChoice {
	verified := map[string]bool{}
	for _, s := range schedules {
		if s.Spec.Template.ClusterName == c.Name && s.Status.LastVerifiedBackup != "" {
			verified[s.Status.LastVerifiedBackup] = true
		}
	}
	var candidates []planner.BackupCandidate
	for i := range backups {
		b := &backups[i]
		if b.Spec.ClusterName != c.Name || b.Status.Phase != etcdv1alpha1.BackupSucceeded || b.Status.CompletionTime == nil ||
			b.Status.CompletionTime.Before(&c.CreationTimestamp) {
			continue
		}
		corrupt, why := b.Corrupt()
		candidates = append(candidates, planner.BackupCandidate{Name: b.Name, Completed: b.Status.CompletionTime.Time,
			Verified: verified[b.Name] || b.Verified(), Corrupt: corrupt, CorruptMessage: why})
	}
	return planner.ChooseBackup(candidates)
}

// The recovery steps: every one is recorded in status before or as it is made.

// actStartRecovery records the recovery: its source, the survivor kept and the members lost.
func (p *pass) actStartRecovery(ctx context.Context, a planner.Action) error {
	c := p.c
	r := &etcdv1alpha1.QuorumRecovery{Source: a.Source, Phase: etcdv1alpha1.RecoveryFencing, Backup: a.Backup, Reason: a.Message, StartedAt: metav1.NewTime(p.now),
		CommittedIndex: int64(min(a.Index, math.MaxInt64))}
	kept := c.Status.Members[:0:0]
	for _, m := range c.Status.Members {
		if len(a.Members) > 0 && m.Name == a.Members[0] {
			kept = append(kept, m)
		} else {
			r.LostMembers = append(r.LostMembers, m.Name)
		}
	}
	if len(a.Members) > 0 {
		r.Survivor = a.Members[0]
		if len(kept) == 0 { // a survivor the operator had not recorded yet (its add was pending)
			kept = append(kept, etcdv1alpha1.MemberStatus{Name: r.Survivor})
		}
	}
	if r.Source == planner.FromBackup {
		kept = nil
		archive, err := p.archiveOf(ctx, a.Backup)
		if err != nil {
			return err
		}
		r.Archive = archive
	}
	c.Status.Recovery, c.Status.Members, c.Status.PendingOperation = r, kept, nil
	if err := p.writeStatus(ctx); err != nil {
		return err
	}
	p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.QuorumLost), a.Message)
	failpoint.Hit(failpoint.AfterRecoveryStart)
	return p.dropRecoveryRequest(ctx)
}

// actStopMembers deletes the pods of the members named.
func (p *pass) actStopMembers(ctx context.Context, a planner.Action) error {
	for _, m := range a.Members {
		if pod := p.obs.pods[m]; pod != nil {
			if err := p.deleteObserved(ctx, pod); err != nil {
				return err
			}
		}
	}
	return nil
}

// actFenceMembers deletes the pods and volumes of the members named.
func (p *pass) actFenceMembers(ctx context.Context, a planner.Action) error {
	for _, m := range a.Members {
		if err := p.deleteMemberObjects(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (p *pass) actAdvanceRecovery(ctx context.Context, a planner.Action) error {
	p.c.Status.Recovery.Phase = etcdv1alpha1.RecoveryPhase(a.Phase)
	return p.writeStatus(ctx)
}

func (p *pass) actRestartFromBackup(ctx context.Context, _ planner.Action) error {
	c := p.c
	// A new incarnation: new members, a new token, so nothing of the old cluster can join it.
	c.Status.Bootstrapped, c.Status.Members, c.Status.ClusterID = false, nil, ""
	c.Status.ClusterToken = fmt.Sprintf("%s-%d", resources.ClusterToken(c), c.Status.NextMemberIndex)
	c.Status.LegacyWALIndex, c.Status.DowngradeTarget = 0, ""
	c.Status.Recovery.Phase = etcdv1alpha1.RecoveryRestoring
	return p.writeStatus(ctx)
}

func (p *pass) actFinishRecovery(ctx context.Context, _ planner.Action) error {
	completeRecovery(p.c, metav1.NewTime(p.now))
	return p.writeStatus(ctx)
}

func completeRecovery(c *etcdv1alpha1.EtcdCluster, now metav1.Time) {
	if r := shared.Recovering(c); r != nil {
		r.Phase, r.CompletedAt = etcdv1alpha1.RecoveryComplete, &now
	}
}
