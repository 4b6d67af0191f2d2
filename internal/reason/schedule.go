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
	// SnapshotsRetained: the schedule was deleted with snapshotDeletionPolicy Retain; its backups and snapshots are kept (event).
	SnapshotsRetained Reason = "SnapshotsRetained"
)
