package planner

import "time"

// ArchivedBackup is a succeeded backup of a schedule, as the recoverable window sees it.
type ArchivedBackup struct {
	Revision  int64
	Completed time.Time
	// ClusterID (hex) of the etcd cluster it was taken from.
	ClusterID string
}

// ArchiveChain is what the archive worker reports of its chain.
type ArchiveChain struct {
	// ClusterID (hex) of the etcd cluster the chain archives.
	ClusterID string
	// First is the first revision of the chain's oldest segment, Last the last durable one and
	// LastTime when the worker received it; Last 0: the chain is empty.
	First, Last int64
	LastTime    time.Time
	// RestartRevision > 0: the chain went on from there after the cluster compacted changes it had
	// not stored, so it does not continue the backups before RestartRevision-1.
	RestartRevision int64
}

// Window is the span a point-in-time restore reaches: from a backup's revision (or any instant
// after its completion) to the archive's last stored revision.
type Window struct {
	EarliestRevision int64
	EarliestTime     time.Time
	LatestRevision   int64
	LatestTime       time.Time
}

// WindowRefresh is how far the latest end of a recorded window may fall behind the archive before
// the record is refreshed: the status of a schedule archiving a cluster under writes is written a
// few times an hour, not on every pass.
const WindowRefresh = 5 * time.Minute

// RecoverableWindow is the window a schedule's backups and its archive's chain give, nil when no
// point in time is reachable through the archive: the chain is empty, or no backup of the chain's
// etcd cluster is continued by it. A backup is continued when the chain holds the revision right
// after it (the chain starts at or before it and did not restart after it) and the chain's end is
// not behind it. The oldest such backup starts the window; a restore from it replays the chain.
func RecoverableWindow(backups []ArchivedBackup, chain ArchiveChain) *Window {
	if chain.Last == 0 || chain.First == 0 {
		return nil
	}
	var from *ArchivedBackup
	for i := range backups {
		b := &backups[i]
		switch {
		case b.ClusterID != chain.ClusterID, b.Revision+1 < chain.First, b.Revision > chain.Last,
			chain.RestartRevision > 0 && b.Revision+1 < chain.RestartRevision:
			continue
		}
		if from == nil || b.Revision < from.Revision || (b.Revision == from.Revision && b.Completed.Before(from.Completed)) {
			from = b
		}
	}
	if from == nil {
		return nil
	}
	w := &Window{EarliestRevision: from.Revision, EarliestTime: from.Completed, LatestRevision: chain.Last, LatestTime: chain.LastTime}
	if w.LatestTime.Before(w.EarliestTime) {
		// No change since before the backup completed: restoring to latest gives the state at
		// (and after) the backup's completion.
		w.LatestTime = w.EarliestTime
	}
	return w
}

// WindowToRecord is the window status should hold, given the one it holds and the one just
// computed from evidence (the worker's report and the backups): the live one when the window
// appeared, went away or its earliest end moved, or when the recorded latest end is WindowRefresh
// behind; else the recorded one, so that writes to the source do not become writes to the API.
func WindowToRecord(recorded, live *Window) *Window {
	switch {
	case recorded == nil || live == nil:
		return live
	case recorded.EarliestRevision != live.EarliestRevision || !recorded.EarliestTime.Equal(live.EarliestTime),
		live.LatestRevision < recorded.LatestRevision,
		live.LatestRevision > recorded.LatestRevision && live.LatestTime.Sub(recorded.LatestTime) >= WindowRefresh:
		return live
	}
	return recorded
}
