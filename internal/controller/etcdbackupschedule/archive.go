package etcdbackupschedule

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// ConditionArchiving is True, on an EtcdBackupSchedule with spec.archive, while its archive worker
// runs; False with the reason it does not.
const ConditionArchiving = "Archiving"

// archiveRequeue is how often a schedule with an archive is looked at without an event: the
// cluster's ID (a recovery from a snapshot makes a new etcd cluster, and so a new chain) changes on
// the EtcdCluster, which does not wake the schedule.
const archiveRequeue = 30 * time.Second

// archiveWorker keeps the continuous archive of schedule s in step with spec.archive: one worker
// pod while it is set, none otherwise. One step per pass: a pod whose configuration is stale (a
// new etcd cluster ID, another destination or flush interval) or that has ended is deleted, and
// the next pass creates its successor. owned are the schedule's backups (the restart after a
// compaction continues after the newest). It returns how long until it wants to look again.
func (r *EtcdBackupScheduleReconciler) archiveWorker(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, owned []etcdv1alpha1.EtcdBackup) (time.Duration, error) {
	pod := &corev1.Pod{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: resources.ArchivePodName(s.Name)}, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("read archive pod: %w", err)
	}
	exists := err == nil && metav1.IsControlledBy(pod, s)
	if s.Spec.Archive == nil {
		meta.RemoveStatusCondition(&s.Status.Conditions, ConditionArchiving)
		s.Status.ArchiveLocation, s.Status.ArchiveRestartRevision, s.Status.RecoverableWindow = "", 0, nil
		forgetArchive(s.Namespace, s.Name)
		if exists && pod.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("delete archive pod: %w", err)
			}
		}
		return 0, nil
	}
	if err == nil && !exists {
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveFailing, fmt.Sprintf("a pod named %s that this schedule does not own is in the way; delete or rename it", pod.Name))
		return archiveRequeue, nil
	}

	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.Template.ClusterName}, c); apierrors.IsNotFound(err) {
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveWaitingForCluster, fmt.Sprintf("EtcdCluster %q does not exist", s.Spec.Template.ClusterName))
		return archiveRequeue, r.deleteArchivePod(ctx, pod, exists)
	} else if err != nil {
		return 0, fmt.Errorf("read cluster: %w", err)
	}
	if c.Status.ClusterID == "" {
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveWaitingForCluster, fmt.Sprintf("EtcdCluster %q has not formed an etcd cluster yet", c.Name))
		return archiveRequeue, r.deleteArchivePod(ctx, pod, exists)
	}

	loc := resources.ArchiveLocation(resources.ArchiveDestination(s.Spec.Template.Destination, resources.ArchiveChain(c.Namespace, c.Name, c.Status.ClusterID)))
	if s.Status.ArchiveLocation != loc {
		// Another chain (a new etcd cluster, another destination) starts from its beginning.
		s.Status.ArchiveLocation, s.Status.ArchiveRestartRevision, s.Status.RecoverableWindow = loc, 0, nil
	}
	if exists {
		if rev := restartAfterCompaction(pod, owned, c.Status.ClusterID); rev > s.Status.ArchiveRestartRevision {
			// Recorded before the stopped worker is replaced, so its successor is built with it
			// even if the operator dies in between: the next pass (woken by this status) replaces it.
			s.Status.ArchiveRestartRevision = rev
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveCompacted, fmt.Sprintf("the archive restarts at revision %d, after backup of revision %d", rev, rev-1))
			return archiveRequeue, nil
		}
	}
	want := resources.ArchivePod(s, c, r.OperatorImage, r.PodIDs, s.Status.ArchiveRestartRevision)
	switch {
	case !exists:
		if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("create archive pod: %w", err)
		}
		r.Recorder.Event(s, corev1.EventTypeNormal, string(reason.ArchiveStarted), "started the archive worker "+want.Name+", archiving to "+s.Status.ArchiveLocation)
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveStarting, "the archive worker "+want.Name+" was created")
		return archiveRequeue, nil
	case !pod.DeletionTimestamp.IsZero():
		return archiveRequeue, nil // its successor is created once it is gone
	case pod.Annotations[naming.AnnotationConfigHash] != want.Annotations[naming.AnnotationConfigHash],
		pod.Status.Phase == corev1.PodFailed, pod.Status.Phase == corev1.PodSucceeded:
		return archiveRequeue, r.deleteArchivePod(ctx, pod, exists)
	}

	compacted := recordArchiveState(s, pod)
	recordArchiveFlushInterval(s)
	if err := r.observeArchive(ctx, s, pod, c.Status.ClusterID); err != nil && meta.IsStatusConditionTrue(s.Status.Conditions, ConditionArchiving) {
		// A fixed text (the error is logged): the message must not change with every failed read.
		cond := meta.FindStatusCondition(s.Status.Conditions, ConditionArchiving)
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, true, reason.Archiving, cond.Message+"; its progress (the recoverable window, the lag) cannot be read on port "+strconv.Itoa(naming.ArchiveStatusPort))
	}
	if compacted && !compactionBackupInFlight(owned, pod) {
		if err := r.backUpNow(ctx, s, "the cluster compacted changes the archive had not stored"); err != nil {
			return 0, err
		}
	}
	return archiveRequeue, nil
}

// deleteArchivePod deletes the schedule's archive pod when there is one.
func (r *EtcdBackupScheduleReconciler) deleteArchivePod(ctx context.Context, pod *corev1.Pod, exists bool) error {
	if !exists || !pod.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete archive pod %s: %w", pod.Name, err)
	}
	return nil
}

// recordArchiveState sets Archiving from the worker's pod: running, failing (with its last words),
// or stopped because the cluster compacted what it had not stored yet, which it returns.
func recordArchiveState(s *etcdv1alpha1.EtcdBackupSchedule, pod *corev1.Pod) (compacted bool) {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != resources.ArchiveContainer {
			continue
		}
		last := st.LastTerminationState.Terminated
		if st.State.Terminated != nil {
			last = st.State.Terminated
		}
		switch {
		case last != nil && last.ExitCode == archive.ExitCompacted && st.State.Running == nil:
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveCompacted, "the cluster compacted changes the archive had not stored; a full backup is taken and the archive restarts after it: "+lastWords(last.Message))
			return true
		case st.State.Running != nil:
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, true, reason.Archiving, fmt.Sprintf("archiving every change of the cluster to %s (worker restarts: %d)", s.Status.ArchiveLocation, st.RestartCount))
			return false
		case last != nil:
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveFailing, fmt.Sprintf("the archive worker exited with code %d (restarts: %d): %s", last.ExitCode, st.RestartCount, lastWords(last.Message)))
			return false
		}
	}
	shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionArchiving, false, reason.ArchiveStarting, "the archive worker is starting")
	return false
}

// lastWords is the end of a container's termination message, short enough for a condition.
func lastWords(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.LastIndex(msg, "\n"); i >= 0 {
		msg = strings.TrimSpace(msg[i+1:])
	}
	if len(msg) > 512 {
		msg = "…" + msg[len(msg)-512:]
	}
	return msg
}

// compactionFailedAt is when the worker last stopped for a compaction, zero when it did not.
func compactionFailedAt(pod *corev1.Pod) time.Time {
	for _, st := range pod.Status.ContainerStatuses {
		for _, t := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
			if st.Name == resources.ArchiveContainer && t != nil && t.ExitCode == archive.ExitCompacted {
				return t.FinishedAt.Time
			}
		}
	}
	return time.Time{}
}

// compactionBackupInFlight says whether a backup taken since the worker stopped for a compaction is
// under way or done, so no other is asked for.
func compactionBackupInFlight(owned []etcdv1alpha1.EtcdBackup, pod *corev1.Pod) bool {
	at := compactionFailedAt(pod)
	for i := range owned {
		b := &owned[i]
		if b.Status.Phase != etcdv1alpha1.BackupFailed && !b.CreationTimestamp.Time.Before(at.Add(-time.Second)) {
			return true
		}
	}
	return false
}

// restartAfterCompaction is the revision a worker stopped by a compaction restarts its chain at:
// just after the newest successful backup of the same etcd cluster completed after it stopped. 0
// when there is no such stop or no such backup yet (the worker keeps its place).
func restartAfterCompaction(pod *corev1.Pod, owned []etcdv1alpha1.EtcdBackup, clusterID string) int64 {
	at := compactionFailedAt(pod)
	if at.IsZero() {
		return 0
	}
	var rev int64
	for i := range owned {
		b := &owned[i]
		if b.Status.Phase == etcdv1alpha1.BackupSucceeded && b.Status.ClusterID == clusterID && b.Status.CompletionTime != nil && b.Status.CompletionTime.After(at) {
			rev = max(rev, b.Status.Revision+1)
		}
	}
	return rev
}
