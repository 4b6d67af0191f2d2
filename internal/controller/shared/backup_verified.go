package shared

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// MarkBackupVerified records a schedule's test-restore verdict on backup b itself (condition
// Verified), where restores and recoveries read it: BackupCorrupt keeps them off it. Written once
// per verdict; a failed write is retried on the schedule's next pass, which records the same
// finished verify Job again. The schedule controller records its test-restores with it, the
// cluster controller the backups its restores found corrupt.
func MarkBackupVerified(ctx context.Context, c client.Client, rec record.EventRecorder, b *etcdv1alpha1.EtcdBackup, job *batchv1.Job, ok bool, why reason.Reason, msg string) {
	if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.BackupConditionVerified); cond != nil && cond.Reason == string(why) {
		return
	}
	if ok {
		// The report says whether the keyspace hash was compared: a backup without a manifest, or
		// one compacted between its hash and its snapshot, is verified by its bytes only.
		rep, err := JobReport(ctx, c, nil, job, true)
		if err == nil && rep.Result != nil && rep.Result.KeyspaceVerified {
			msg += fmt.Sprintf("; keyspace hash equal to its source member's at revision %d", b.Status.Revision)
		} else {
			msg += "; keyspace hash not compared (no manifest with one, or another compaction)"
		}
		if err == nil && rep.Result != nil && rep.Result.Chain != nil {
			msg += fmt.Sprintf("; its archive replayed onto it to revision %d (%d revisions)", rep.Result.Chain.Revision, rep.Result.Chain.Applied)
		}
	}
	before := b.DeepCopy()
	SetCondition(&b.Status.Conditions, b.Generation, etcdv1alpha1.BackupConditionVerified, ok, why, msg)
	if err := c.Status().Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		log.FromContext(ctx).Info("could not record the test-restore on the backup; retrying on the next pass", "backup", b.Name, "error", err.Error())
		return
	}
	if !ok {
		rec.Event(b, corev1.EventTypeWarning, string(reason.BackupCorrupt), "the stored snapshot is not what this backup recorded, so no restore or recovery uses it: "+msg)
	}
}
