package reason

// EtcdBackup: set by the controller (conditions Complete and Failed; Warning event on failure).
const (
	// Running: the backup Job is taking and uploading the snapshot.
	Running Reason = "Running"
	// Succeeded: the snapshot is stored; status has its location, revision, size and SHA-256.
	Succeeded Reason = "Succeeded"
	// ClusterNotFound: the EtcdCluster named by spec.clusterName does not exist (the backup fails after 10 minutes).
	// Do: fix spec.clusterName (immutable: create a new EtcdBackup).
	ClusterNotFound Reason = "ClusterNotFound"
	// CredentialsSecretNotFound: the S3 credentials Secret is missing or lacks accessKeyID/secretAccessKey.
	// Do: create the Secret with both keys, then a new EtcdBackup.
	CredentialsSecretNotFound Reason = "CredentialsSecretNotFound"
	// NamespaceTerminating: the namespace is being deleted, so no backup Job can start.
	NamespaceTerminating Reason = "NamespaceTerminating"
	// BackupVerified: a test-restore found the snapshot as its manifest and record say (SHA-256 and size) and serving at its revision, with the keyspace hash of its source where it could be compared (condition Verified=True).
	BackupVerified Reason = "BackupVerified"
	// BackupCorrupt: a test-restore found the stored snapshot no longer what it claims (its bytes, its manifest or its keyspace hash differ from the record; the message has which), so no restore and no FromBackup recovery uses it (condition Verified=False, Warning event, metric etcd_autopilot_backup_corrupt).
	// Do: do not restore it; find out what changed the stored object (bit rot, a hand edit, a replaced file); take a new backup; delete the corrupt one once investigated.
	BackupCorrupt Reason = "BackupCorrupt"
)

// EtcdBackup: reported by the operator's backup, restore, verify and snapshot-delete Jobs ("Job report"):
// the reason of the EtcdBackup's Failed=True, of a restoring EtcdCluster's Restored=False or of a
// schedule's Verified=False, with a Warning event.
const (
	// ClusterUnavailable: no member of the cluster answered with a leader, so no snapshot could be taken.
	// Do: make the cluster Available first (kubectl etcd status NAME), then take a new backup.
	ClusterUnavailable Reason = "ClusterUnavailable"
	// SnapshotFailed: etcd refused or broke off the snapshot.
	// Do: read the message; check the member's logs and free disk space.
	SnapshotFailed Reason = "SnapshotFailed"
	// BucketNotFound: the S3 bucket does not exist.
	// Do: create the bucket or fix s3.bucket (a new EtcdBackup).
	BucketNotFound Reason = "BucketNotFound"
	// InvalidCredentials: the object store rejected the access key.
	// Do: fix the credentials Secret.
	InvalidCredentials Reason = "InvalidCredentials"
	// AccessDenied: the credentials are valid but may not write (or read) the object.
	// Do: grant the key access to the bucket and prefix.
	AccessDenied Reason = "AccessDenied"
	// UploadFailed: the upload to the object store failed after retries.
	// Do: check the endpoint and the network from the namespace to it.
	UploadFailed Reason = "UploadFailed"
	// WriteFailed: writing the snapshot to the PVC failed (full or read-only volume).
	// Do: free or grow the backup volume.
	WriteFailed Reason = "WriteFailed"
	// SnapshotNotFound: the snapshot to restore, verify or delete is not at its recorded location.
	// Do: check that nobody deleted or moved it; restore from another backup.
	SnapshotNotFound Reason = "SnapshotNotFound"
	// DownloadFailed: reading the snapshot from its location failed.
	// Do: check the object store or PVC and the credentials.
	DownloadFailed Reason = "DownloadFailed"
	// SnapshotChecksumMismatch: the snapshot's size or SHA-256 differs from its record: it was changed or truncated, and is refused.
	// Do: restore from another backup; find out who changed the stored file.
	SnapshotChecksumMismatch Reason = "SnapshotChecksumMismatch"
	// ManifestMismatch: the manifest stored beside the snapshot disagrees with the EtcdBackup's record (SHA-256 or size), or is not a manifest; one of them was changed, and the snapshot is refused.
	// Do: restore from another backup; find out who changed the stored objects.
	ManifestMismatch Reason = "ManifestMismatch"
	// KeyspaceHashMismatch: the test-restore of a snapshot served a keyspace whose hash (etcd HashKV) differs from the one its source member reported when the snapshot was taken: the bytes are as written, but they do not hold the source's data.
	// Do: do not restore that backup; check the source cluster's consistency (a member may have diverged) and take a new backup.
	KeyspaceHashMismatch Reason = "KeyspaceHashMismatch"
	// SnapshotCorrupt: etcdutl found the snapshot corrupt; it is refused.
	// Do: restore from another backup.
	SnapshotCorrupt Reason = "SnapshotCorrupt"
	// RestoreFailed: etcdutl could not restore the snapshot into a data directory.
	// Do: read the message; check storage.size holds the snapshot twice.
	RestoreFailed Reason = "RestoreFailed"
	// DeleteFailed: the stored snapshot could not be deleted (schedule retention or snapshotDeletionPolicy Delete); it is left in place.
	// Do: delete the object by hand if it should go.
	DeleteFailed Reason = "DeleteFailed"
	// VerifyFailed: the test-restore of a backup did not serve, or not at the recorded revision.
	// Do: do not rely on that backup; take a new one and check the cluster's health.
	VerifyFailed Reason = "VerifyFailed"
	// ArchiveChainBroken: a point-in-time restore found the archive's chain of segments broken between the full snapshot and the target (a missing, overlapping, corrupt or foreign segment, or one that does not continue the snapshot); nothing is restored.
	// Do: restore to a point before the break (the message names the segment), or from a newer full snapshot after it; check who changed the archive.
	ArchiveChainBroken Reason = "ArchiveChainBroken"
	// PointInTimeUnreachable: the target of a point-in-time restore is before the full snapshot (the newest full snapshot at or before the target is needed) or beyond the last revision the archive holds; nothing is restored.
	// Do: restore from an older full snapshot, or choose a target inside the recoverable window.
	PointInTimeUnreachable Reason = "PointInTimeUnreachable"
)

// EtcdBackup: events only.
const (
	// BackupStarted: the backup Job was created.
	BackupStarted Reason = "BackupStarted"
	// BackupSucceeded: the snapshot is stored.
	BackupSucceeded Reason = "BackupSucceeded"
	// SnapshotDeleted: the backup was deleted and its stored snapshot with it.
	SnapshotDeleted Reason = "SnapshotDeleted"
	// SnapshotRetained: the backup was deleted with its schedule, whose snapshotDeletionPolicy Retain keeps the snapshot.
	SnapshotRetained Reason = "SnapshotRetained"
	// SnapshotLeftInPlace: the snapshot could not be deleted (no Job can run in a terminating namespace); it is left where it is.
	// Do: delete it from the object store or PVC by hand if it should go.
	SnapshotLeftInPlace Reason = "SnapshotLeftInPlace"
	// SnapshotDeleteFailed: deleting the stored snapshot failed; it is left in place (the message has the Job's reason).
	// Do: delete it by hand if it should go.
	SnapshotDeleteFailed Reason = "SnapshotDeleteFailed"
)
