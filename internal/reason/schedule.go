package reason

// EtcdBackupSchedule: conditions Scheduled and Verified, and events.
const (
	// Scheduled: the schedule is active; the message has the next run.
	Scheduled Reason = "Scheduled"
	// Waiting: a run is due but the previous backup is still in flight; it starts when that one ends.
	Waiting Reason = "Waiting"
	// Suspended: spec.suspend is set; no new backups are taken.
	// Do: set spec.suspend false to resume.
	Suspended Reason = "Suspended"
	// InvalidSchedule: spec.schedule does not parse as a cron line.
	// Do: fix spec.schedule (five fields, or a macro such as @daily).
	InvalidSchedule Reason = "InvalidSchedule"
	// Verified: the newest backup was test-restored into a throwaway etcd and served at its recorded revision.
	Verified Reason = "Verified"
	// BackupCreated: a scheduled EtcdBackup was created (event).
	BackupCreated Reason = "BackupCreated"
	// VerifyStarted: a test-restore Job of the newest backup was started (event).
	VerifyStarted Reason = "VerifyStarted"
	// Archiving: the continuous archive's worker runs and stores the cluster's changes (condition Archiving).
	Archiving Reason = "Archiving"
	// ArchiveStarting: the archive worker pod was created or is starting.
	ArchiveStarting Reason = "ArchiveStarting"
	// ArchiveWaitingForCluster: the EtcdCluster does not exist or has not formed yet, so there is no etcd cluster to archive.
	ArchiveWaitingForCluster Reason = "ArchiveWaitingForCluster"
	// ArchiveFailing: the archive worker exits with an error and is being restarted; the message has its last output.
	// Do: read the message (credentials, bucket, reachability of the cluster); changes committed meanwhile are archived once it runs again, as long as the cluster has not compacted them.
	ArchiveFailing Reason = "ArchiveFailing"
	// ArchiveCompacted: the cluster compacted changes the archive had not stored (the worker was down for longer than the cluster keeps its history), so the chain cannot continue: a full backup is taken at once and the archive restarts after it; the changes in between are lost to point-in-time restores.
	ArchiveCompacted Reason = "ArchiveCompacted"
	// ArchiveStarted: the archive worker pod was created (event).
	ArchiveStarted Reason = "ArchiveStarted"
	// SnapshotsRetained: the schedule was deleted with snapshotDeletionPolicy Retain; its backups and snapshots are kept (event).
	SnapshotsRetained Reason = "SnapshotsRetained"
	// ArchivePruned: retention deleted a backup, and with it the archive's segments no remaining backup can replay (those before the oldest remaining backup of that etcd cluster), or the whole archive of an etcd cluster no remaining backup was taken from; the message has the count and where the archive now starts (event).
	ArchivePruned Reason = "ArchivePruned"
	// ArchivePruneFailed: the archive's segments that retention no longer needs could not be deleted; they stay, and the snapshot's deletion went ahead (event).
	// Do: read the message (credentials, permission to delete in the bucket or on the volume); the next deletion of a backup of the same etcd cluster deletes them; an archive of an old etcd cluster whose last backup is gone has to be deleted by hand at the location the message names.
	ArchivePruneFailed Reason = "ArchivePruneFailed"
)
