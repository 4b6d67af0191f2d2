// Package etcdbackupschedule holds the EtcdBackupSchedule reconciler: the backups it runs, their
// retention and test-restores, and the archive worker with the recoverable window it reports.
package etcdbackupschedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/speccheck"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// ConditionScheduled is True, on an EtcdBackupSchedule, while runs are being made; False with
// InvalidSchedule or Suspended.
const ConditionScheduled = "Scheduled"

// ConditionVerified is the outcome of the newest test-restore, on an EtcdBackupSchedule with spec.verify.
const ConditionVerified = "Verified"

// scheduleBusyRequeue is the pace while a run is in flight (its status changes also wake us).
const scheduleBusyRequeue = 10 * time.Second

// EtcdBackupScheduleReconciler makes EtcdBackups on a cron schedule, one at a time, and deletes
// those retention no longer keeps (their snapshots go with them, see SnapshotFinalizer).
type EtcdBackupScheduleReconciler struct {
	client.Client
	Recorder record.EventRecorder
	// OperatorImage runs the test-restore Jobs' init container.
	OperatorImage string
	// PodIDs: whether the Jobs name their user and group IDs or the platform assigns them.
	PodIDs resources.PodIDs
	// Now is the clock; tests move it.
	Now func() time.Time
	// ArchiveStatusURL is where an archive worker with this pod IP serves its progress; nil:
	// naming.ArchiveStatusURL (tests serve it elsewhere).
	ArchiveStatusURL func(podIP string) string
	// apiReader reads past the cache, just before a run starts: a run created a moment ago may not
	// be in the cache yet, and no run may start beside it.
	apiReader client.Reader
}

// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackupschedules,verbs=list;watch;update
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackupschedules/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackupschedules/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackups,verbs=list;create;patch;delete
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackups/status,verbs=patch

// Reconcile is one pass: retention, then a new run when one is due and none is in flight.
func (r *EtcdBackupScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := r.Get(ctx, req.NamespacedName, s); apierrors.IsNotFound(err) {
		metrics.ForgetSchedule(req.Namespace, req.Name)
		forgetArchive(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, s)
	}
	if controllerutil.AddFinalizer(s, naming.ScheduleFinalizer) {
		if err := r.Update(ctx, s); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := s.DeepCopy()
	res, err := r.step(ctx, s)
	recordScheduleMetrics(s, shared.NowOr(r.Now))
	if _, serr := shared.PatchStatusIfChanged(ctx, r.Client, orig, s, orig.Status, s.Status); apierrors.IsConflict(serr) {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	} else if serr != nil {
		return ctrl.Result{}, serr
	}
	return res, err
}

// step is one pass of a valid schedule: read its runs back from its backups → retention →
// verification and the archive worker → a new run when one is due.
func (r *EtcdBackupScheduleReconciler) step(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule) (ctrl.Result, error) {
	if problems := speccheck.Schedule(s); len(problems) > 0 {
		prev := ""
		if c := meta.FindStatusCondition(s.Status.Conditions, ConditionScheduled); c != nil && c.Reason == string(reason.InvalidSpec) {
			prev = c.Message
		}
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionScheduled, false, reason.InvalidSpec, shared.InvalidSpecMessage(r.Recorder, s, prev, problems))
		return ctrl.Result{}, nil // a spec change wakes us
	}
	now := shared.NowOr(r.Now)
	cron, err := backupschedule.Parse(s.Spec.Schedule)
	if err != nil {
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionScheduled, false, reason.InvalidSchedule, err.Error())
		return ctrl.Result{}, nil // a spec change wakes us
	}
	owned, err := ownedBackups(ctx, r.Client, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	items, byName := readRuns(s, owned)
	if err := r.expire(ctx, s, items, byName, now); err != nil {
		return ctrl.Result{}, err
	}
	verifyWait, err := r.verify(ctx, s, owned, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	archiveWait, err := r.archiveWorker(ctx, s, owned)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.scheduleRun(ctx, s, cron, items, requeue(verifyWait, archiveWait).RequeueAfter, now)
}

// readRuns lists the schedule's backups not being deleted as runs, by name too, and records the
// newest run and the last success in status. They are read back from the backups themselves, so a
// lost status write (a conflict, a crash right after the create) is repaired on the next pass.
func readRuns(s *etcdv1alpha1.EtcdBackupSchedule, owned []etcdv1alpha1.EtcdBackup) ([]backupschedule.Backup, map[string]*etcdv1alpha1.EtcdBackup) {
	var items []backupschedule.Backup
	byName := map[string]*etcdv1alpha1.EtcdBackup{}
	for i := range owned {
		b := &owned[i]
		if !b.DeletionTimestamp.IsZero() {
			continue
		}
		byName[b.Name] = b
		finished := b.Finished()
		created := b.CreationTimestamp.Time
		at, atErr := time.Parse(time.RFC3339, b.Annotations[naming.AnnotationScheduledAt])
		if atErr == nil {
			created = at
		}
		items = append(items, backupschedule.Backup{Name: b.Name, Created: created, Finished: finished, Succeeded: b.Status.Phase == etcdv1alpha1.BackupSucceeded})
		if atErr == nil && (s.Status.LastScheduleTime == nil || s.Status.LastScheduleTime.Time.Before(created)) {
			t := metav1.NewTime(created)
			s.Status.LastScheduleTime, s.Status.LastBackup = &t, b.Name
		}
		if b.Status.Phase == etcdv1alpha1.BackupSucceeded && b.Status.CompletionTime != nil &&
			(s.Status.LastSuccessfulTime == nil || s.Status.LastSuccessfulTime.Before(b.Status.CompletionTime)) {
			s.Status.LastSuccessfulTime = b.Status.CompletionTime.DeepCopy()
		}
	}
	return items, byName
}

// expire deletes the runs retention lets go (keepLast, maxAge), except those a cluster is being
// restored from.
func (r *EtcdBackupScheduleReconciler) expire(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, items []backupschedule.Backup, byName map[string]*etcdv1alpha1.EtcdBackup, now time.Time) error {
	maxAge, err := s.Spec.MaxAgeDuration()
	if err != nil {
		return err // not reached: rejectInvalidSpec reports an unreadable maxAge first
	}
	restoring, err := r.backupsBeingRestored(ctx, s.Namespace)
	if err != nil {
		return err
	}
	for _, name := range backupschedule.Expired(items, int(s.Spec.KeepLast), maxAge, now) {
		if cluster, ok := restoring[name]; ok {
			log.FromContext(ctx).Info("retention keeps a backup a cluster is being restored from", "schedule", s.Name, "backup", name, "cluster", cluster)
			continue
		}
		if err := r.Delete(ctx, byName[name]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete expired backup %s: %w", name, err)
		}
		log.FromContext(ctx).Info("retention deleted a backup", "schedule", s.Name, "backup", name)
	}
	return nil
}

// scheduleRun starts the run that is due, unless the schedule is suspended or a run is in flight
// (runs never overlap), and says when the next one is; otherWait is the soonest another part of the
// pass (verification, the archive) needs to look again.
func (r *EtcdBackupScheduleReconciler) scheduleRun(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, cron cron.Schedule, items []backupschedule.Backup, otherWait time.Duration, now time.Time) (ctrl.Result, error) {
	last := s.CreationTimestamp.Time
	if s.Status.LastScheduleTime != nil {
		last = s.Status.LastScheduleTime.Time
	}
	run, due, next := backupschedule.Due(cron, last, now)
	running := backupschedule.Running(items)
	switch {
	case s.Spec.Suspend:
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionScheduled, false, reason.Suspended, "spec.suspend is set; no new backups are taken")
		return requeue(otherWait, 0), nil
	case due:
		started := false
		if !running { // as the cache has it; startRun asks the API server
			var err error
			if started, err = r.startRun(ctx, s, run, "created EtcdBackup %s"); err != nil {
				return ctrl.Result{}, err
			}
		}
		if !started {
			// Never overlap: the run starts when the one in flight ends (its status change wakes us).
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionScheduled, true, reason.Waiting, fmt.Sprintf("the run due at %s waits for the backup in flight", run.UTC().Format(time.RFC3339)))
			return requeue(otherWait, scheduleBusyRequeue), nil
		}
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionScheduled, true, reason.Scheduled, "next run at "+next.UTC().Format(time.RFC3339))
		return requeue(otherWait, scheduleBusyRequeue), nil
	}
	shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionScheduled, true, reason.Scheduled, "next run at "+next.UTC().Format(time.RFC3339))
	wait := next.Sub(now)
	if running && wait > scheduleBusyRequeue {
		wait = scheduleBusyRequeue
	}
	return requeue(otherWait, wait), nil
}

// createRun creates the EtcdBackup of the run at run (its name is the run's, so a repeated create
// after a crash finds it) and records it; event is the event's message, with the backup's name.
func (r *EtcdBackupScheduleReconciler) createRun(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, run time.Time, event string) error {
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: backupschedule.BackupName(s.Name, run), Namespace: s.Namespace,
			Labels:          map[string]string{naming.LabelSchedule: s.Name},
			Annotations:     map[string]string{naming.AnnotationScheduledAt: run.UTC().Format(time.RFC3339)},
			Finalizers:      []string{naming.SnapshotFinalizer},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, etcdv1alpha1.GroupVersion.WithKind("EtcdBackupSchedule"))},
		},
		Spec: *s.Spec.Template.DeepCopy(),
	}
	if err := r.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create backup %s: %w", b.Name, err)
	}
	t := metav1.NewTime(run)
	s.Status.LastScheduleTime, s.Status.LastBackup = &t, b.Name
	r.Recorder.Eventf(s, corev1.EventTypeNormal, string(reason.BackupCreated), event, b.Name)
	return nil
}

// startRun creates the run at run unless one is in flight, as the API server (not the cache) has
// it; it says whether the run started.
func (r *EtcdBackupScheduleReconciler) startRun(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, run time.Time, event string) (bool, error) {
	current, err := ownedBackups(ctx, r.apiReader, s)
	if err != nil {
		return false, err
	}
	for i := range current {
		if current[i].DeletionTimestamp.IsZero() && !current[i].Finished() && current[i].Name != backupschedule.BackupName(s.Name, run) {
			return false, nil
		}
	}
	return true, r.createRun(ctx, s, run, event)
}

// backUpNow takes a backup out of schedule (why says why, in the event), unless one is in flight:
// its completion serves the same purpose.
func (r *EtcdBackupScheduleReconciler) backUpNow(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, why string) error {
	_, err := r.startRun(ctx, s, shared.NowOr(r.Now).Truncate(time.Second), "created EtcdBackup %s out of schedule: "+strings.ReplaceAll(why, "%", "%%"))
	return err
}

// ownedBackups are the EtcdBackups s made: its label narrows the list, its controller reference
// decides. Retention and verification act on these only, never on a hand-made EtcdBackup that
// carries the label, nor on the backups an earlier schedule of the same name left behind.
func ownedBackups(ctx context.Context, reader client.Reader, s *etcdv1alpha1.EtcdBackupSchedule) ([]etcdv1alpha1.EtcdBackup, error) {
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := reader.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{naming.LabelSchedule: s.Name}); err != nil {
		return nil, fmt.Errorf("list backups of schedule %s: %w", s.Name, err)
	}
	var out []etcdv1alpha1.EtcdBackup
	for _, b := range list.Items {
		if metav1.IsControlledBy(&b, s) {
			out = append(out, b)
		}
	}
	return out, nil
}

// backupsBeingRestored are the EtcdBackups of namespace that a cluster is being created or rebuilt
// from (spec.bootstrap.restore until the restore is confirmed, or a FromBackup quorum-loss recovery), each
// with that cluster's name. Retention leaves them until it is done: deleting one takes its snapshot
// with it, which members not yet restored still have to read, and a recovery that has fenced the
// old members has nothing else to start from.
func (r *EtcdBackupScheduleReconciler) backupsBeingRestored(ctx context.Context, namespace string) (map[string]string, error) {
	clusters := &etcdv1alpha1.EtcdClusterList{}
	if err := r.List(ctx, clusters, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list clusters that may restore a backup: %w", err)
	}
	out := map[string]string{}
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if rec := shared.Recovering(c); rec != nil && rec.Source == planner.FromBackup && rec.Backup != "" {
			out[rec.Backup] = c.Name
		}
		// Until Restored is True: confirmRestored checks the members' revision against the backup's.
		if b := c.Spec.Bootstrap; b != nil && b.Restore != nil && b.Restore.BackupName != "" && !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionRestored) {
			out[b.Restore.BackupName] = c.Name
		}
	}
	return out, nil
}

// finalize applies spec.snapshotDeletionPolicy before the schedule goes. Retain (the default)
// releases every backup it made (controller reference and SnapshotFinalizer removed), so garbage
// collection leaves the records and their snapshots alone and they stay restorable; a backup
// retention already deleted keeps its snapshot unless its deletion Job had started (see
// EtcdBackupReconciler.retainedBySchedule): Retain errs on the side of keeping. Delete leaves them owned:
// garbage collection deletes them after the schedule, and each one's finalizer its snapshot.
// Only updates are made, which the API allows in a namespace being deleted.
func (r *EtcdBackupScheduleReconciler) finalize(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule) error {
	if !controllerutil.ContainsFinalizer(s, naming.ScheduleFinalizer) {
		return nil
	}
	if s.Spec.SnapshotDeletionPolicy != etcdv1alpha1.SnapshotDelete {
		// Past the cache: a run created a moment ago may not be in it yet, and one left owned goes
		// with the schedule, its snapshot too.
		owned, err := ownedBackups(ctx, r.apiReader, s)
		if err != nil {
			return err
		}
		kept := 0
		for i := range owned {
			b := &owned[i]
			if !b.DeletionTimestamp.IsZero() {
				continue
			}
			before := b.DeepCopy()
			b.OwnerReferences = shared.WithoutOwner(b.OwnerReferences, s.UID)
			controllerutil.RemoveFinalizer(b, naming.SnapshotFinalizer)
			if err := r.Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("release backup %s: %w", b.Name, err)
			}
			kept++
		}
		log.FromContext(ctx).Info("schedule deleted; its backups and snapshots are kept", "schedule", s.Name, "backups", kept)
		r.Recorder.Eventf(s, corev1.EventTypeNormal, string(reason.SnapshotsRetained), "kept %d backups and their snapshots (snapshotDeletionPolicy Retain)", kept)
	}
	controllerutil.RemoveFinalizer(s, naming.ScheduleFinalizer)
	if err := r.Update(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// requeue is the sooner of two positive waits (0: none).
func requeue(a, b time.Duration) ctrl.Result {
	if a <= 0 || (b > 0 && b < a) {
		a = b
	}
	return ctrl.Result{RequeueAfter: a}
}

// verify test-restores the newest successful backup on spec.verify's schedule, one Job per
// backup, and records the outcome (status.lastVerifiedBackup, the Verified condition, a metric).
// It returns how long until the next verify run.
func (r *EtcdBackupScheduleReconciler) verify(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, backups []etcdv1alpha1.EtcdBackup, now time.Time) (time.Duration, error) {
	if s.Spec.Verify == nil {
		meta.RemoveStatusCondition(&s.Status.Conditions, ConditionVerified)
		return 0, nil
	}
	cron, err := backupschedule.Parse(s.Spec.Verify.Schedule)
	if err != nil {
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionVerified, false, reason.InvalidSchedule, err.Error())
		return 0, nil
	}
	succeeded := succeededNewestFirst(backups)
	var newest *etcdv1alpha1.EtcdBackup
	if len(succeeded) > 0 {
		newest = succeeded[0]
	}
	last := s.CreationTimestamp.Time
	if s.Status.LastVerifyTime != nil {
		last = s.Status.LastVerifyTime.Time
	}
	run, due, next := backupschedule.Due(cron, last, now)
	if newest == nil {
		return next.Sub(now), nil
	}
	if err := r.recordNewestFinishedVerify(ctx, s, succeeded); err != nil {
		return 0, err
	}
	job := &batchv1.Job{}
	err = shared.GetOwnedJob(ctx, r.Client, client.ObjectKey{Namespace: s.Namespace, Name: resources.VerifyJobName(newest.Name)}, s.UID, job)
	var foreign *shared.ForeignJob
	switch {
	case errors.As(err, &foreign):
		shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionVerified, false, reason.JobNameConflict, foreign.Error())
	case err == nil: // recorded above once it has finished
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("read verify job: %w", err)
	case due && s.Status.LastVerifiedBackup != newest.Name:
		image, err := versions.Image(newest.Status.EtcdVersion)
		if err != nil {
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionVerified, false, reason.UnsupportedVersion, fmt.Sprintf("backup %s was taken from etcd %s: %v", newest.Name, newest.Status.EtcdVersion, err))
			break
		}
		if err := r.Create(ctx, resources.VerifyJob(s, newest, notCorrupt(succeeded[1:]), r.OperatorImage, image, r.PodIDs)); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("create verify job: %w", err)
		}
		r.Recorder.Event(s, corev1.EventTypeNormal, string(reason.VerifyStarted), "test-restoring "+newest.Name)
	}
	if due {
		t := metav1.NewTime(run)
		s.Status.LastVerifyTime = &t
	}
	return next.Sub(now), nil
}

// notCorrupt are the backups of bs not marked corrupt: the ones a test-restore checks again.
func notCorrupt(bs []*etcdv1alpha1.EtcdBackup) []*etcdv1alpha1.EtcdBackup {
	var out []*etcdv1alpha1.EtcdBackup
	for _, b := range bs {
		if corrupt, _ := b.Corrupt(); !corrupt {
			out = append(out, b)
		}
	}
	return out
}

// succeededNewestFirst are the schedule's succeeded backups that are not being deleted, the most
// recently completed first.
func succeededNewestFirst(backups []etcdv1alpha1.EtcdBackup) []*etcdv1alpha1.EtcdBackup {
	var done []*etcdv1alpha1.EtcdBackup
	for i := range backups {
		if b := &backups[i]; b.Status.Phase == etcdv1alpha1.BackupSucceeded && b.DeletionTimestamp.IsZero() && b.Status.CompletionTime != nil {
			done = append(done, b)
		}
	}
	slices.SortStableFunc(done, func(a, b *etcdv1alpha1.EtcdBackup) int {
		return b.Status.CompletionTime.Compare(a.Status.CompletionTime.Time)
	})
	return done
}

// recordNewestFinishedVerify records the outcome of the finished test-restore of the most recent
// backup (done: newest first) that has one. A test-restore can outlast the next backup (a large database, a busy node):
// were only the newest backup's Job read, a schedule whose runs come faster than its test-restores
// end would never report one.
func (r *EtcdBackupScheduleReconciler) recordNewestFinishedVerify(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, done []*etcdv1alpha1.EtcdBackup) error {
	for _, b := range done {
		job := &batchv1.Job{}
		err := shared.GetOwnedJob(ctx, r.Client, client.ObjectKey{Namespace: s.Namespace, Name: resources.VerifyJobName(b.Name)}, s.UID, job)
		var foreign *shared.ForeignJob
		switch {
		case apierrors.IsNotFound(err) || errors.As(err, &foreign):
			continue
		case err != nil:
			return fmt.Errorf("read verify job of %s: %w", b.Name, err)
		case shared.JobFinished(job):
			r.recordVerify(ctx, s, b, job)
			r.recordRechecks(ctx, job, done)
			return nil
		}
	}
	return nil
}

// recordVerify records a finished test-restore Job of backup b once.
func (r *EtcdBackupScheduleReconciler) recordVerify(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, b *etcdv1alpha1.EtcdBackup, job *batchv1.Job) {
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			if s.Status.LastVerifiedBackup != b.Name {
				s.Status.LastVerifiedBackup = b.Name
				metrics.BackupLastVerified.WithLabelValues(s.Namespace, s.Name).Set(float64(cond.LastTransitionTime.Unix()))
				r.Recorder.Event(s, corev1.EventTypeNormal, string(reason.Verified), "test-restore of "+b.Name+" succeeded")
			}
			msg := fmt.Sprintf("%s restored into a throwaway etcd: SHA-256 and size as recorded, serving at revision ≥ %d", b.Name, b.Status.Revision)
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionVerified, true, reason.Verified, msg)
			shared.MarkBackupVerified(ctx, r.Client, r.Recorder, b, job, true, reason.BackupVerified, msg)
		case batchv1.JobFailed:
			why, msg := reason.JobFailed, "the verify Job failed without a report"
			if rep, err := shared.JobReport(ctx, r.Client, nil, job, false); err == nil && rep.Reason != "" {
				why, msg = rep.Reason, rep.Message
			}
			failed := fmt.Sprintf("test-restore of %s failed: %s", b.Name, msg)
			shared.WarnOnTransition(r.Recorder, s, s.Status.Conditions, ConditionVerified, why, failed)
			shared.SetCondition(&s.Status.Conditions, s.Generation, ConditionVerified, false, why, failed)
			if backup.CorruptVerdict(why) {
				shared.MarkBackupVerified(ctx, r.Client, r.Recorder, b, job, false, reason.BackupCorrupt, fmt.Sprintf("%s: %s", why, msg))
			}
		}
	}
}

// recordRechecks marks corrupt the other backups a finished test-restore Job found changed (its
// report's Corrupt), each once.
func (r *EtcdBackupScheduleReconciler) recordRechecks(ctx context.Context, job *batchv1.Job, done []*etcdv1alpha1.EtcdBackup) {
	rep, err := shared.JobReport(ctx, r.Client, nil, job, jobSucceeded(job))
	if err != nil {
		return
	}
	for _, found := range rep.Corrupt {
		for _, b := range done {
			if b.Name == found.Backup {
				shared.MarkBackupVerified(ctx, r.Client, r.Recorder, b, nil, false, reason.BackupCorrupt,
					fmt.Sprintf("%s: %s (rechecked by the test-restore %s)", found.Reason, found.Message, job.Name))
			}
		}
	}
}

// SetupWithManager registers the reconciler; its backups' status changes wake it.
func (r *EtcdBackupScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.apiReader = mgr.GetAPIReader()
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdBackupSchedule{}).
		Owns(&etcdv1alpha1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.Pod{}).
		Complete(metrics.Instrument("etcdbackupschedule", r))
}

// jobSucceeded says whether j completed.
func jobSucceeded(j *batchv1.Job) bool {
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
