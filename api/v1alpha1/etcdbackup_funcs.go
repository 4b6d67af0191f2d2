package v1alpha1

import "k8s.io/apimachinery/pkg/api/meta"

// BackupCorruptReason is the reason of an EtcdBackup's Verified=False when a test-restore found its
// stored snapshot changed (internal/reason.BackupCorrupt; the same word).
const BackupCorruptReason = "BackupCorrupt"

// Corrupt says whether a test-restore found b's stored snapshot changed since it was written, with
// the evidence: such a backup is never restored. A backup never test-restored is not corrupt.
func (b *EtcdBackup) Corrupt() (bool, string) {
	c := meta.FindStatusCondition(b.Status.Conditions, BackupConditionVerified)
	if c == nil || c.Status != "False" || c.Reason != BackupCorruptReason {
		return false, ""
	}
	return true, c.Message
}

// Verified says whether a test-restore found b's stored snapshot as recorded (condition Verified=True).
func (b *EtcdBackup) Verified() bool {
	return meta.IsStatusConditionTrue(b.Status.Conditions, BackupConditionVerified)
}

// Finished says whether b's run has ended, either way (Succeeded or Failed).
func (b *EtcdBackup) Finished() bool {
	return b.Status.Phase == BackupSucceeded || b.Status.Phase == BackupFailed
}
