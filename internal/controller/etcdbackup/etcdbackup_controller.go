// Package etcdbackup holds the EtcdBackup reconciler: one Job per backup that streams the snapshot,
// its report recorded in status, and the deletion of the stored snapshot (with the archive prune it
// carries) when a backup made by a schedule goes.
package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/speccheck"
)

const (
	// backupWaitLimit is how long a backup waits for its cluster to exist and be available.
	backupWaitLimit = 10 * time.Minute
	backupRequeue   = 10 * time.Second
)

// EtcdBackupReconciler runs one Job per EtcdBackup and records its result. The snapshot is
// streamed by the Job (`worker backup`, operator image), never through the operator.
type EtcdBackupReconciler struct {
	client.Client
	Recorder record.EventRecorder
	// OperatorImage runs the backup Jobs.
	OperatorImage string
	// PodIDs: whether the Jobs name their user and group IDs or the platform assigns them.
	PodIDs resources.PodIDs
	Now    func() time.Time
	// apiReader reads from the API server, past the cache: users' credential Secrets, one at a time
	// when a backup starts (the cache holds only the objects the operator made, see CacheOptions),
	// and a finished Job's pods when the cache has not seen their end yet.
	apiReader client.Reader
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackups,verbs=list;watch;update
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackups/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackups/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list;watch;create
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch

// Reconcile moves one EtcdBackup through Pending → Running → Succeeded | Failed.
func (r *EtcdBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &etcdv1alpha1.EtcdBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); apierrors.IsNotFound(err) {
		shared.ForgetBackup(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.deleteSnapshot(ctx, b)
	}
	if b.Finished() {
		shared.RecordBackupMetrics(b)
		return ctrl.Result{}, nil
	}
	orig := b.DeepCopy()
	res, err := r.step(ctx, b)
	written, serr := shared.PatchStatusIfChanged(ctx, r.Client, orig, b, orig.Status, b.Status)
	if apierrors.IsConflict(serr) {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if serr != nil {
		return ctrl.Result{}, serr
	}
	if written && b.Finished() {
		shared.RecordBackupMetrics(b)
	}
	return res, err
}

func (r *EtcdBackupReconciler) step(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (ctrl.Result, error) {
	if problems := speccheck.Backup(b); len(problems) > 0 {
		// A backup's spec is immutable: one it cannot act on fails for good.
		r.failed(b, reason.InvalidSpec, shared.InvalidSpecMessage(r.Recorder, b, "", problems))
		return ctrl.Result{}, nil
	}
	job := &batchv1.Job{}
	err := shared.GetOwnedJob(ctx, r.Client, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b.Name)}, b.UID, job)
	var foreign *shared.ForeignJob
	switch {
	case errors.As(err, &foreign):
		r.failed(b, reason.JobNameConflict, foreign.Error())
		return ctrl.Result{}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("read backup job: %w", err)
	case err == nil:
		return r.observeJob(ctx, b, job)
	}

	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, c); apierrors.IsNotFound(err) {
		return r.wait(b, reason.ClusterNotFound, fmt.Sprintf("EtcdCluster %q does not exist", b.Spec.ClusterName))
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read cluster: %w", err)
	}
	if !hasQuorum(c) {
		return r.wait(b, reason.ClusterUnavailable, fmt.Sprintf("EtcdCluster %q is not bootstrapped or has no leader", c.Name))
	}
	if s := b.Spec.Destination.S3; s != nil {
		sec := &corev1.Secret{}
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: s.CredentialsSecret}, sec)
		if apierrors.IsNotFound(err) || (err == nil && (len(sec.Data[resources.SecretAccessKeyID]) == 0 || len(sec.Data[resources.SecretSecretAccessKey]) == 0)) {
			r.failed(b, reason.CredentialsSecretNotFound, fmt.Sprintf("Secret %q with keys %s and %s is needed", s.CredentialsSecret, resources.SecretAccessKeyID, resources.SecretSecretAccessKey))
			return ctrl.Result{}, nil
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("read credentials secret: %w", err)
		}
	}
	if err := r.Create(ctx, resources.BackupJob(b, c, r.OperatorImage, r.PodIDs)); namespaceTerminating(err) {
		r.failed(b, reason.NamespaceTerminating, fmt.Sprintf("namespace %s is being deleted: no backup Job can start", b.Namespace))
		return ctrl.Result{}, nil
	} else if err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create backup job: %w", err)
	}
	now := metav1.NewTime(shared.NowOr(r.Now))
	b.Status.Phase, b.Status.StartTime = etcdv1alpha1.BackupRunning, &now
	shared.SetCondition(&b.Status.Conditions, b.Generation, etcdv1alpha1.BackupConditionComplete, false, reason.Running, "the backup Job is running")
	r.Recorder.Event(b, corev1.EventTypeNormal, string(reason.BackupStarted), "started Job "+resources.BackupJobName(b.Name))
	return ctrl.Result{}, nil
}

// hasQuorum says whether c was bootstrapped and its last observation found a leader: a snapshot
// can be taken. It deliberately ignores the Available condition, which alarms such as NOSPACE may
// turn False: a full database is when a backup is needed most (the Job picks a member that can
// serve it, see backup.Take).
func hasQuorum(c *etcdv1alpha1.EtcdCluster) bool {
	if !c.Status.Bootstrapped {
		return false
	}
	for _, m := range c.Status.Members {
		if m.Role == etcdv1alpha1.RoleLeader {
			return true
		}
	}
	return false
}

// namespaceTerminating says whether err is the API server refusing to create an object because
// its namespace is being deleted: retrying cannot help, the namespace only goes further away.
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// wait keeps the backup Pending while its cluster is missing or unavailable, for backupWaitLimit.
func (r *EtcdBackupReconciler) wait(b *etcdv1alpha1.EtcdBackup, why reason.Reason, msg string) (ctrl.Result, error) {
	if shared.NowOr(r.Now).Sub(b.CreationTimestamp.Time) > backupWaitLimit {
		r.failed(b, why, fmt.Sprintf("%s for more than %s", msg, backupWaitLimit))
		return ctrl.Result{}, nil
	}
	b.Status.Phase = etcdv1alpha1.BackupPending
	shared.SetCondition(&b.Status.Conditions, b.Generation, etcdv1alpha1.BackupConditionComplete, false, why, msg)
	return ctrl.Result{RequeueAfter: backupRequeue}, nil
}

func (r *EtcdBackupReconciler) failed(b *etcdv1alpha1.EtcdBackup, why reason.Reason, msg string) {
	now := metav1.NewTime(shared.NowOr(r.Now))
	b.Status.Phase, b.Status.CompletionTime = etcdv1alpha1.BackupFailed, &now
	shared.SetCondition(&b.Status.Conditions, b.Generation, etcdv1alpha1.BackupConditionComplete, false, why, msg)
	shared.SetCondition(&b.Status.Conditions, b.Generation, etcdv1alpha1.BackupConditionFailed, true, why, msg)
	r.Recorder.Event(b, corev1.EventTypeWarning, string(why), msg)
}

// observeJob records a finished Job's report (its pod's termination message).
func (r *EtcdBackupReconciler) observeJob(ctx context.Context, b *etcdv1alpha1.EtcdBackup, job *batchv1.Job) (ctrl.Result, error) {
	done, failed := false, false
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			done = true
		case batchv1.JobFailed:
			failed = true
		}
	}
	if b.Status.Phase != etcdv1alpha1.BackupRunning {
		// The status write after the Job's creation was lost: the Job's start is the backup's.
		start := metav1.NewTime(job.CreationTimestamp.Time)
		b.Status.Phase, b.Status.StartTime = etcdv1alpha1.BackupRunning, &start
		shared.SetCondition(&b.Status.Conditions, b.Generation, etcdv1alpha1.BackupConditionComplete, false, reason.Running, "the backup Job is running")
	}
	if !done && !failed {
		return ctrl.Result{}, nil // the Job's status changes wake us
	}
	rep, err := shared.JobReport(ctx, r.Client, r.apiReader, job, done)
	if err != nil {
		return ctrl.Result{}, err
	}
	if done && rep.Result != nil {
		res := rep.Result
		now := metav1.NewTime(shared.NowOr(r.Now))
		b.Status.Phase, b.Status.CompletionTime = etcdv1alpha1.BackupSucceeded, &now
		b.Status.EtcdVersion, b.Status.Revision, b.Status.Size, b.Status.SHA256, b.Status.Location = res.EtcdVersion, res.Revision, res.Size, res.SHA256, res.Location
		b.Status.ClusterID, b.Status.Manifest = res.ClusterID, res.Manifest
		if k := res.Keyspace; k != nil {
			b.Status.KeyspaceHash = &etcdv1alpha1.BackupKeyspaceHash{Hash: int64(k.Hash), Revision: k.Revision, CompactRevision: k.CompactRevision}
		}
		msg := fmt.Sprintf("%d bytes at revision %d from member %s stored at %s", res.Size, res.Revision, res.Member, res.Location)
		shared.SetCondition(&b.Status.Conditions, b.Generation, etcdv1alpha1.BackupConditionComplete, true, reason.Succeeded, msg)
		r.Recorder.Event(b, corev1.EventTypeNormal, string(reason.BackupSucceeded), msg)
		log.FromContext(ctx).Info("backup succeeded", "backup", b.Name, "location", res.Location, "size", res.Size)
		return ctrl.Result{}, nil
	}
	why, msg := reason.JobFailed, "the backup Job failed without a report"
	if rep.Reason != "" {
		why, msg = rep.Reason, rep.Message
	}
	r.failed(b, why, msg)
	return ctrl.Result{}, nil
}

// deleteSnapshot runs the Job that deletes the stored snapshot of a deleted EtcdBackup that owns
// it (SnapshotFinalizer: those made by a schedule), then lets the record go. It never holds the
// record forever: a failed deletion, a schedule deleted with snapshotDeletionPolicy Retain and a
// namespace being deleted (where no Job can start) each release it with an event saying where
// the snapshot stays.
func (r *EtcdBackupReconciler) deleteSnapshot(ctx context.Context, b *etcdv1alpha1.EtcdBackup) error {
	if !controllerutil.ContainsFinalizer(b, naming.SnapshotFinalizer) {
		return nil
	}
	release := func() error {
		controllerutil.RemoveFinalizer(b, naming.SnapshotFinalizer)
		if err := r.Update(ctx, b); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release backup %s: %w", b.Name, err)
		}
		return nil
	}
	if b.Status.Location == "" {
		return release() // nothing was stored
	}
	job := &batchv1.Job{}
	err := shared.GetOwnedJob(ctx, r.Client, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupDeleteJobName(b.Name)}, b.UID, job)
	if apierrors.IsNotFound(err) {
		if retained, err := r.retainedBySchedule(ctx, b); err != nil {
			return err
		} else if retained {
			r.Recorder.Eventf(b, corev1.EventTypeNormal, string(reason.SnapshotRetained), "kept %s: its schedule is being deleted with snapshotDeletionPolicy Retain", b.Status.Location)
			return release()
		}
		del, err := r.snapshotDeleteJob(ctx, b)
		if err != nil {
			return err
		}
		err = r.Create(ctx, del)
		if namespaceTerminating(err) {
			// The namespace is going and takes every Job with it: holding the record would
			// hang the namespace's deletion forever. Say where the snapshot stays. The event
			// is best effort (the API refuses new events there too); the log is the record.
			msg := fmt.Sprintf("namespace %s is being deleted, so no Job can delete the snapshot: %s is left in place", b.Namespace, b.Status.Location)
			log.FromContext(ctx).Info(msg, "backup", b.Name, "location", b.Status.Location)
			r.Recorder.Event(b, corev1.EventTypeWarning, string(reason.SnapshotLeftInPlace), msg)
			return release()
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create snapshot delete job: %w", err)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("read snapshot delete job: %w", err)
	}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			if err := r.recordPrune(ctx, b, job); err != nil {
				return err
			}
			r.Recorder.Event(b, corev1.EventTypeNormal, string(reason.SnapshotDeleted), "deleted "+b.Status.Location)
			return release()
		case batchv1.JobFailed:
			rep, err := shared.JobReport(ctx, r.Client, r.apiReader, job, false)
			if err != nil {
				return err
			}
			r.Recorder.Eventf(b, corev1.EventTypeWarning, string(reason.SnapshotDeleteFailed), "could not delete %s, left in place: %s %s", b.Status.Location, rep.Reason, rep.Message)
			return release()
		}
	}
	return nil // the Job's progress wakes us
}

// retainedBySchedule says whether b goes with its schedule under snapshotDeletionPolicy Retain:
// garbage collection (a foreground deletion of the schedule, or the namespace's) can reach b
// before the schedule's finalizer releases it, and Retain means the snapshot stays. A deletion
// Job retention already started is not stopped by this (the caller asks only before creating one).
func (r *EtcdBackupReconciler) retainedBySchedule(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (bool, error) {
	s, err := r.controllingSchedule(ctx, b)
	if s == nil || err != nil {
		return false, err
	}
	return !s.DeletionTimestamp.IsZero() && s.Spec.SnapshotDeletionPolicy != etcdv1alpha1.SnapshotDelete, nil
}

// SetupWithManager registers the reconciler; Job changes wake their EtcdBackup.
func (r *EtcdBackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.apiReader = mgr.GetAPIReader()
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Complete(metrics.Instrument("etcdbackup", r))
}
