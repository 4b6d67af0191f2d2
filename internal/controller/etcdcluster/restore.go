package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// restoreInput resolves the snapshot the initial members' init containers restore: the backup of a
// FromBackup quorum-loss recovery, else spec.bootstrap.restore; nil when the cluster starts empty. A named EtcdBackup must have succeeded, and its
// recorded size and SHA-256 are checked before etcdutl sees the snapshot.
func (p *pass) restoreInput(ctx context.Context) (*resources.RestoreInput, error) {
	c := p.c
	name := ""
	switch r := shared.Recovering(c); {
	case r != nil && r.Source == planner.FromBackup:
		name = r.Backup
	case c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil:
		return nil, nil
	case c.Spec.Bootstrap.Restore.Source != nil:
		r := c.Spec.Bootstrap.Restore
		return &resources.RestoreInput{Source: *r.Source, SHA256: r.SHA256}, nil
	default:
		name = c.Spec.Bootstrap.Restore.BackupName
	}
	b := &etcdv1alpha1.EtcdBackup{}
	if err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, b); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("EtcdBackup %q does not exist", name)
	} else if err != nil {
		return nil, fmt.Errorf("read EtcdBackup %q: %w", name, err)
	}
	if b.Status.Phase != etcdv1alpha1.BackupSucceeded {
		return nil, fmt.Errorf("EtcdBackup %q has not succeeded (phase %q)", name, b.Status.Phase)
	}
	corrupt, why := b.Corrupt()
	if msg := planner.RefuseBackup(planner.BackupCandidate{Name: name, Corrupt: corrupt, CorruptMessage: why}); msg != "" {
		if shared.Recovering(c) != nil {
			return nil, &corruptBackupError{msg + "; it was marked corrupt after this recovery chose it: recover from a surviving member, or create a new EtcdCluster restored from another backup"}
		}
		return nil, &corruptBackupError{msg + "; name another backup in spec.bootstrap.restore.backupName"}
	}
	in := &resources.RestoreInput{Source: resources.SnapshotSource(b), SHA256: b.Status.SHA256, Size: b.Status.Size}
	if rec := shared.Recovering(c); rec != nil {
		// A FromBackup recovery replays the archive recorded when it started, to its end.
		if chain := archiveContinuing(c, b); rec.Archive != "" && chain != nil && resources.ArchiveLocation(*chain) == rec.Archive {
			in.Archive, in.PointInTime = chain, &etcdv1alpha1.PointInTimeSpec{}
		}
		return in, nil
	}
	if pit := pointInTime(c); pit != nil {
		if b.Status.ClusterID == "" {
			return nil, fmt.Errorf("EtcdBackup %q records no cluster ID, so no archive can be found to continue it: restore it without pointInTime", name)
		}
		if pit.Revision > 0 && pit.Revision < b.Status.Revision {
			return nil, fmt.Errorf("pointInTime.revision %d is before EtcdBackup %q (revision %d): restore from an older backup", pit.Revision, name, b.Status.Revision)
		}
		// The snapshot holds the state of some instant before its completion, so only a later
		// target is surely not already passed by it.
		if pit.Time != nil && b.Status.CompletionTime != nil && pit.Time.Before(b.Status.CompletionTime) {
			return nil, fmt.Errorf("pointInTime.time %s is before EtcdBackup %q completed (%s): restore from an older backup", pit.Time.UTC().Format(time.RFC3339), name, b.Status.CompletionTime.UTC().Format(time.RFC3339))
		}
		chain := resources.ArchiveDestination(b.Spec.Destination, resources.ArchiveChain(b.Namespace, b.Spec.ClusterName, b.Status.ClusterID))
		in.Archive, in.PointInTime = &chain, pit
	}
	return in, nil
}

// corruptBackupError: the backup to restore is marked corrupt, so no member may start from it.
type corruptBackupError struct{ msg string }

func (e *corruptBackupError) Error() string { return e.msg }

// archiveContinuing is where the archive that continues backup b of cluster c is, nil when b records
// no cluster ID (taken before archives existed).
func archiveContinuing(c *etcdv1alpha1.EtcdCluster, b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.BackupDestination {
	if b.Status.ClusterID == "" {
		return nil
	}
	chain := resources.ArchiveDestination(b.Spec.Destination, resources.ArchiveChain(c.Namespace, b.Spec.ClusterName, b.Status.ClusterID))
	return &chain
}

// archiveOf is the location of the archive a FromBackup recovery from backup name replays: the chain
// that continues it, when a schedule of this cluster is archiving into exactly that chain (the etcd
// cluster the backup was taken from is the one that lost quorum); "" otherwise.
func (p *pass) archiveOf(ctx context.Context, name string) (string, error) {
	c := p.c
	b := &etcdv1alpha1.EtcdBackup{}
	if err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, b); apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read EtcdBackup %q: %w", name, err)
	}
	chain := archiveContinuing(c, b)
	if chain == nil {
		return "", nil
	}
	schedules := &etcdv1alpha1.EtcdBackupScheduleList{}
	if err := p.r.List(ctx, schedules, client.InNamespace(c.Namespace)); err != nil {
		return "", fmt.Errorf("list backup schedules: %w", err)
	}
	loc := resources.ArchiveLocation(*chain)
	for _, s := range schedules.Items {
		if s.Spec.Template.ClusterName == c.Name && s.Spec.Archive != nil && s.Status.ArchiveLocation == loc {
			return loc, nil
		}
	}
	return "", nil
}

// abandonUnusableArchive falls back to the backup alone when the archive a FromBackup recovery
// replays cannot be replayed (a broken chain, nothing that continues the snapshot): a recovery that
// can restore the backup never waits on a damaged archive. The choice is recorded in status before
// the failed member pods are deleted, so they are made again without the archive even if the
// operator dies in between. It says whether it acted.
func (p *pass) abandonUnusableArchive(ctx context.Context) (bool, error) {
	c := p.c
	rec := shared.Recovering(c)
	if rec == nil || rec.Source != planner.FromBackup || c.Status.Bootstrapped {
		return false, nil
	}
	var failed []*corev1.Pod
	var why backup.Report
	for _, name := range slices.Sorted(maps.Keys(p.obs.pods)) {
		if rep, ok := restoreFailure(p.obs.pods[name]); ok && (rep.Reason == reason.ArchiveChainBroken || rep.Reason == reason.PointInTimeUnreachable) {
			failed, why = append(failed, p.obs.pods[name]), rep
		}
	}
	if len(failed) == 0 {
		return false, nil
	}
	if rec.Archive != "" {
		p.r.Recorder.Eventf(c, corev1.EventTypeWarning, string(why.Reason), "the archive %s cannot be replayed onto backup %s (%s): restoring the backup alone, without the changes made after it", rec.Archive, rec.Backup, why.Message)
		rec.Archive = ""
		if err := p.writeStatus(ctx); err != nil {
			return false, err
		}
	}
	for _, pod := range failed {
		if err := p.deleteObserved(ctx, pod); err != nil {
			return false, err
		}
	}
	return true, nil
}

// abandonCorruptBackup switches a FromBackup recovery to another backup when a member's restore refused
// the chosen one's bytes (the stored snapshot changed since it was taken, or its manifest did): that
// backup is marked corrupt, the newest good one is chosen (planner.ChooseBackup) and recorded in status,
// and only then are the pods that restored the refused bytes deleted, so they are made again from the
// new choice even if the operator dies in between (a failed pod is tied to the backup it restored by
// the SHA-256 its restore checked). Every member pod restoring other bytes than the recorded choice's
// goes with its volume, not only the failed ones: one that restored the old choice before its bytes
// changed must not join members restored from another backup. With no other good backup the recovery
// waits, and says so. It says whether it acted.
func (p *pass) abandonCorruptBackup(ctx context.Context) (bool, error) {
	c := p.c
	rec := shared.Recovering(c)
	if rec == nil || rec.Source != planner.FromBackup || c.Status.Bootstrapped {
		return false, nil
	}
	refused := map[string]backup.Report{} // SHA-256 restored → the refusal
	for _, pod := range p.obs.pods {
		if rep, ok := restoreFailure(pod); ok && backup.CorruptVerdict(rep.Reason) {
			if sha := restoredSHA256(pod); sha != "" {
				refused[sha] = rep
			}
		}
	}
	if len(refused) == 0 {
		return false, nil
	}
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := p.r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return false, fmt.Errorf("list backups: %w", err)
	}
	shaOf := map[string]string{} // backup name → SHA-256
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.ClusterName != c.Name {
			continue
		}
		shaOf[b.Name] = b.Status.SHA256
		if rep, ok := refused[b.Status.SHA256]; ok && b.Status.SHA256 != "" {
			if corrupt, _ := b.Corrupt(); !corrupt {
				shared.MarkBackupVerified(ctx, p.r.Client, p.r.Recorder, b, nil, false, reason.BackupCorrupt,
					fmt.Sprintf("%s: %s (found by the restore of the quorum-loss recovery of %s)", rep.Reason, rep.Message, c.Name))
			}
		}
	}
	if rep, stillChosen := refused[shaOf[rec.Backup]]; stillChosen {
		schedules := &etcdv1alpha1.EtcdBackupScheduleList{}
		if err := p.r.List(ctx, schedules, client.InNamespace(c.Namespace)); err != nil {
			return false, fmt.Errorf("list backup schedules: %w", err)
		}
		choice := pickBackup(c, list.Items, schedules.Items)
		if choice.Name == "" || choice.Name == rec.Backup {
			msg := fmt.Sprintf("the restore refused backup %s (%s: %s) and no other good backup of %s exists: recover from a surviving member, or restore a new EtcdCluster from another copy", rec.Backup, rep.Reason, rep.Message, c.Name)
			p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.BackupCorrupt), msg)
			return false, nil
		}
		archive, err := p.archiveOf(ctx, choice.Name)
		if err != nil {
			return false, err
		}
		p.r.Recorder.Eventf(c, corev1.EventTypeWarning, string(reason.BackupCorrupt), "the restore refused backup %s (%s: %s): the recovery restores %s instead%s",
			rec.Backup, rep.Reason, rep.Message, choice.Name, noteSuffix(choice.Note))
		rec.Backup, rec.Archive = choice.Name, archive
		rec.Reason += fmt.Sprintf("; switched to backup %s after the restore refused the first choice's bytes", choice.Name)
		if err := p.writeStatus(ctx); err != nil {
			return false, err
		}
	}
	acted, want := false, shaOf[rec.Backup]
	for _, name := range slices.Sorted(maps.Keys(p.obs.pods)) {
		if sha := restoredSHA256(p.obs.pods[name]); sha != "" && want != "" && sha != want {
			if err := p.deleteMemberObjects(ctx, name); err != nil {
				return false, err
			}
			acted = true
		}
	}
	return acted, nil
}

// restoredSHA256 is the SHA-256 pod's restore init container holds its snapshot to, "" when none.
func restoredSHA256(pod *corev1.Pod) string {
	sha, _ := resources.ContainerArg(pod.Spec.InitContainers, resources.RestoreContainer, "--sha256=")
	return sha
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

// pointInTime is spec.bootstrap.restore.pointInTime, nil when the restore is of the snapshot alone.
func pointInTime(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.PointInTimeSpec {
	if b := c.Spec.Bootstrap; b != nil && b.Restore != nil {
		return b.Restore.PointInTime
	}
	return nil
}

// observeRestore reports the restore of the initial members in the Restored condition: a refused
// snapshot (tampered, corrupt, unreachable) keeps etcd from starting and says why here.
func (p *pass) observeRestore(ctx context.Context) {
	c := p.c
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil {
		return
	}
	if c.Status.Bootstrapped {
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionRestored); cond == nil || cond.Status != "True" {
			p.confirmRestored(ctx)
		}
		return
	}
	for _, name := range slices.Sorted(maps.Keys(p.obs.pods)) {
		if rep, ok := restoreFailure(p.obs.pods[name]); ok {
			msg := fmt.Sprintf("member %s: %s; no member was started", name, rep.Message)
			shared.WarnOnTransition(p.r.Recorder, c, c.Status.Conditions, etcdv1alpha1.ConditionRestored, rep.Reason, msg)
			shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionRestored, false, rep.Reason, msg)
			return
		}
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionRestored); cond == nil || cond.Reason == string(reason.BackupNotReady) || cond.Reason == string(reason.RestoreSourceUnusable) || cond.Reason == string(reason.BackupCorrupt) {
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionRestored, false, reason.Restoring, "restoring the initial members from the snapshot")
	}
}

// confirmRestored sets Restored=True only on evidence from etcd: a member's revision at least the
// snapshot's (a restore that did not happen leaves an empty keyspace at revision 1). Raw sources
// carry no recorded revision; for them the init containers' success is the evidence.
func (p *pass) confirmRestored(ctx context.Context) {
	c := p.c
	var want int64
	if name := c.Spec.Bootstrap.Restore.BackupName; name != "" {
		b := &etcdv1alpha1.EtcdBackup{}
		if err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, b); err == nil {
			want = b.Status.Revision
		}
	}
	var have int64
	for _, st := range p.obs.status {
		have = max(have, st.Revision)
	}
	switch {
	case len(p.obs.status) == 0:
		return // nobody answered yet: decide on a later pass
	case have < want:
		msg := fmt.Sprintf("the members run at revision %d, below the snapshot's %d: the snapshot was not restored into them", have, want)
		shared.WarnOnTransition(p.r.Recorder, c, c.Status.Conditions, etcdv1alpha1.ConditionRestored, reason.NotRestored, msg)
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionRestored, false, reason.NotRestored, msg)
	default:
		msg := fmt.Sprintf("the initial members were restored from the snapshot at revision %d, with revisions raised past the old cluster's (now %d) and everything before compacted, so that watchers of the old cluster re-list", want, have)
		if want == 0 {
			msg = fmt.Sprintf("the initial members were restored from the snapshot, with revisions raised past the old cluster's (now %d) and everything before compacted, so that watchers of the old cluster re-list", have)
		}
		if pit := pointInTimeReport(p.obs.pods); pit != nil {
			msg = fmt.Sprintf("the initial members were restored to revision %d of the old cluster (the snapshot at revision %d and %d archived revisions", pit.Revision, pit.SnapshotRevision, pit.Applied)
			if !pit.Time.IsZero() {
				msg += ", the last observed at " + pit.Time.UTC().Format(time.RFC3339Nano)
			}
			msg += fmt.Sprintf("); revisions start at %d, everything before compacted", pit.Revision+pit.Bump)
		}
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionRestored, true, reason.Restored, msg)
	}
}

// pointInTimeReport is what the member that replayed the archive reported, nil when none did (a
// restore of the snapshot alone, or the pod is gone).
func pointInTimeReport(pods map[string]*corev1.Pod) *backup.PointInTimeResult {
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		for _, s := range pods[name].Status.InitContainerStatuses {
			if t := s.State.Terminated; s.Name == resources.RestoreContainer && t != nil && t.ExitCode == 0 {
				if rep, ok := backup.ParseReport(t.Message); ok && rep.PointInTime != nil {
					return rep.PointInTime
				}
			}
		}
	}
	return nil
}

// restoreFailure is the report of a pod's failed restore init container, unless it has since
// succeeded (a transient failure that a retry fixed).
func restoreFailure(pod *corev1.Pod) (backup.Report, bool) {
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name != resources.RestoreContainer || (s.State.Terminated != nil && s.State.Terminated.ExitCode == 0) {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t == nil || t.ExitCode == 0 {
				continue
			}
			if rep, ok := backup.ParseReport(t.Message); ok && rep.Reason != "" {
				return rep, true
			}
		}
	}
	return backup.Report{}, false
}

// observeSnapshot tells the planner what the bootstrap restores: whether only one member may read
// the snapshot (resources.RestoreInput.OneReader), or why no member can read it yet. A refusal is
// told in the Restored condition and, when its reason changes, an event; nothing is created.
func (p *pass) observeSnapshot(ctx context.Context) *planner.Snapshot {
	c := p.c
	in, err := p.restoreInput(ctx)
	if in == nil && err == nil {
		return nil
	}
	s, why, unusable := &planner.Snapshot{}, reason.BackupNotReady, ""
	var corrupt *corruptBackupError
	if errors.As(err, &corrupt) {
		why = reason.BackupCorrupt
	}
	if err != nil {
		unusable = err.Error()
	} else {
		s.OneReader = in.OneReader()
		if unusable = p.unusableClaim(ctx, in.Source.PVC); unusable != "" {
			why = reason.RestoreSourceUnusable
		}
	}
	if unusable == "" {
		return s
	}
	s.Unusable, s.Reason = unusable, why
	msg := unusable + "; no member was started"
	// Against the condition this pass started with: observeRestore may have just replaced it.
	shared.WarnOnTransition(p.r.Recorder, c, p.orig.Status.Conditions, etcdv1alpha1.ConditionRestored, why, msg)
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionRestored, false, why, msg)
	return s
}

// unusableClaim says why no pod could read a snapshot on claim d, "" when one can (or d is nil).
// Refused: a claim that does not exist, is being deleted or lost its volume (the pod would wait
// for ever), and a raw block volume (the snapshot is read as a file). A Pending claim is not
// refused: a WaitForFirstConsumer claim of a pre-provisioned local volume binds only once the
// restoring pod is scheduled.
func (p *pass) unusableClaim(ctx context.Context, d *etcdv1alpha1.PVCDestination) string {
	if d == nil {
		return ""
	}
	pvc := &corev1.PersistentVolumeClaim{}
	// Past the cache, which holds only the claims the operator made.
	err := p.r.apiReader.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: d.ClaimName}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("claim %s, which holds the snapshot, does not exist in namespace %s", d.ClaimName, p.c.Namespace)
	case err != nil:
		return fmt.Sprintf("read claim %s, which holds the snapshot: %v", d.ClaimName, err)
	case pvc.DeletionTimestamp != nil:
		return fmt.Sprintf("claim %s, which holds the snapshot, is being deleted", d.ClaimName)
	case pvc.Status.Phase == corev1.ClaimLost:
		return fmt.Sprintf("claim %s, which holds the snapshot, lost its volume (phase Lost)", d.ClaimName)
	case pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock:
		return fmt.Sprintf("claim %s is a raw block volume (volumeMode Block); the snapshot is read as a file from a filesystem volume", d.ClaimName)
	}
	return ""
}
