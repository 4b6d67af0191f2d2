package etcdbackup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// snapshotDeleteJob is the Job that deletes b's snapshot. When b's schedule archives the cluster,
// the Job first prunes the archive chain that continues b, as planner.ArchiveRetention decides from
// the backups that remain: the archive's retention follows the backups'. The decision is made once,
// when the Job is created, from what remains then; a later backup of the same chain has a later
// revision, so the bound never moves past a backup that remains.
func (r *EtcdBackupReconciler) snapshotDeleteJob(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (*batchv1.Job, error) {
	plain := resources.BackupDeleteJob(b, r.OperatorImage, r.PodIDs)
	chain := resources.BackupArchiveChain(b)
	if chain == nil {
		return plain, nil
	}
	s, err := r.controllingSchedule(ctx, b)
	if err != nil {
		return nil, err
	}
	// A schedule that never archived has no chain to prune (and its bucket policy may not allow
	// listing). A schedule that is gone was deleted with snapshotDeletionPolicy Delete: its
	// backups go with it, and so does what they kept of the archive.
	if s != nil && s.Spec.Archive == nil {
		return plain, nil
	}
	loc := resources.ArchiveLocation(*chain)
	live, err := r.chainIsLive(ctx, b, loc)
	if err != nil {
		return nil, err
	}
	all := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, all, client.InNamespace(b.Namespace)); err != nil {
		return nil, fmt.Errorf("list the backups that may need the archive: %w", err)
	}
	var remaining []planner.ChainBackup
	for i := range all.Items {
		o := &all.Items[i]
		if o.UID == b.UID {
			continue
		}
		cb := planner.ChainBackup{Revision: o.Status.Revision,
			Usable: o.Status.Phase == etcdv1alpha1.BackupSucceeded && o.DeletionTimestamp.IsZero()}
		if c := resources.BackupArchiveChain(o); c != nil {
			cb.Chain = resources.ArchiveLocation(*c)
		}
		remaining = append(remaining, cb)
	}
	d := planner.ArchiveRetention(loc, remaining, live)
	log.FromContext(ctx).Info("archive retention", "backup", b.Name, "chain", loc, "pruneBefore", d.Before, "drop", d.Drop, "live", live)
	return resources.BackupDeleteJobPruning(b, d.Before, d.Drop, r.OperatorImage, r.PodIDs), nil
}

// controllingSchedule is the schedule that made b, nil when none (a hand-made backup, or a
// schedule already gone).
func (r *EtcdBackupReconciler) controllingSchedule(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (*etcdv1alpha1.EtcdBackupSchedule, error) {
	ref := metav1.GetControllerOf(b)
	if ref == nil || ref.Kind != "EtcdBackupSchedule" {
		return nil, nil
	}
	s := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: ref.Name}, s); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read schedule %s: %w", ref.Name, err)
	}
	if s.UID != ref.UID {
		return nil, nil
	}
	return s, nil
}

// chainIsLive says whether a writer continues the chain at loc, the archive of b's etcd cluster:
// the cluster still is that etcd cluster, or a schedule records the chain as the one its worker
// writes. Such a chain is never deleted whole.
func (r *EtcdBackupReconciler) chainIsLive(ctx context.Context, b *etcdv1alpha1.EtcdBackup, loc string) (bool, error) {
	c := &etcdv1alpha1.EtcdCluster{}
	err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, c)
	if err == nil && c.Status.ClusterID == b.Status.ClusterID {
		return true, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("read cluster %s: %w", b.Spec.ClusterName, err)
	}
	schedules := &etcdv1alpha1.EtcdBackupScheduleList{}
	if err := r.List(ctx, schedules, client.InNamespace(b.Namespace)); err != nil {
		return false, fmt.Errorf("list schedules: %w", err)
	}
	for _, s := range schedules.Items {
		if s.Status.ArchiveLocation == loc {
			return true, nil
		}
	}
	return false, nil
}

// recordPrune reports what the finished deletion Job of b did to the archive: an event on the
// schedule (on b when the schedule is gone) when segments went or the prune failed.
func (r *EtcdBackupReconciler) recordPrune(ctx context.Context, b *etcdv1alpha1.EtcdBackup, job *batchv1.Job) error {
	rep, ok, err := r.pruneReport(ctx, job)
	if err != nil || !ok {
		return err
	}
	s, err := r.controllingSchedule(ctx, b)
	if err != nil {
		return err
	}
	var about runtime.Object = b
	if s != nil {
		about = s
	}
	switch {
	case rep.Reason != "":
		msg := fmt.Sprintf("could not prune the archive %s after deleting backup %s (%d segments deleted before): %s %s; the rest stays until the next deletion of a backup of that etcd cluster",
			rep.Chain, b.Name, rep.Deleted, rep.Reason, rep.Message)
		if rep.Dropped {
			msg = fmt.Sprintf("could not delete the archive %s of etcd cluster %s, whose last backup %s was deleted (%d segments deleted before): %s %s; it stays and has to be deleted by hand",
				rep.Chain, b.Status.ClusterID, b.Name, rep.Deleted, rep.Reason, rep.Message)
		}
		r.Recorder.Event(about, corev1.EventTypeWarning, string(reason.ArchivePruneFailed), msg)
	case rep.Deleted == 0:
	case rep.Dropped:
		r.Recorder.Eventf(about, corev1.EventTypeNormal, string(reason.ArchivePruned),
			"deleted the archive %s (%d segments): no remaining backup was taken from etcd cluster %s", rep.Chain, rep.Deleted, b.Status.ClusterID)
	default:
		r.Recorder.Eventf(about, corev1.EventTypeNormal, string(reason.ArchivePruned),
			"deleted %d segments of the archive %s that no remaining backup needs (before revision %d, the oldest remaining backup's); the archive now starts at revision %d",
			rep.Deleted, rep.Chain, rep.Before, rep.First)
	}
	return nil
}

// pruneReport reads the prune's report from the succeeded pod of the deletion Job; ok is false
// when the Job had no prune or it left no report.
func (r *EtcdBackupReconciler) pruneReport(ctx context.Context, job *batchv1.Job) (archive.PruneReport, bool, error) {
	var rep archive.PruneReport
	if len(job.Spec.Template.Spec.InitContainers) == 0 {
		return rep, false, nil
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return rep, false, fmt.Errorf("list snapshot delete pods: %w", err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded || !shared.OwnedBy(&p, job.UID) {
			continue
		}
		for _, st := range p.Status.InitContainerStatuses {
			if t := st.State.Terminated; st.Name == resources.ArchivePruneContainer && t != nil &&
				json.Unmarshal([]byte(strings.TrimSpace(t.Message)), &rep) == nil && rep.Chain != "" {
				return rep, true, nil
			}
		}
	}
	return rep, false, nil
}
