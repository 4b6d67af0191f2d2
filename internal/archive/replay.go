package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
)

// BumpFor is the --bump-revision for restoring a replay that reached revision restored from a
// chain whose last archived revision is latest: past every revision the old cluster can have
// served, so no revision number repeats with other contents. The margin stands for what the old
// cluster served and the archive never stored.
func BumpFor(latest, restored int64) int64 {
	return max(latest-restored, 0) + backup.DefaultBumpMargin
}

// ReplayConfig is a point-in-time replay: the chain up to the target is collapsed into the full
// snapshot's database, with no etcd running (replaystore.go), and the result is written as a new
// snapshot for the usual restore.
type ReplayConfig struct {
	// WorkDir holds the scratch database, removed afterwards.
	WorkDir string
	// Snapshot is the full snapshot file, already fetched and checked; consumed (moved into
	// WorkDir) as a restore consumes it.
	Snapshot string
	// TargetRevision is the last revision applied; 0: the end of the chain.
	TargetRevision int64
	// TargetTime, when set, stops before the first revision observed after it.
	TargetTime time.Time
	// Output is where the resulting snapshot is written.
	Output string
	Log    logr.Logger
}

// ReplayResult describes a replay's snapshot.
type ReplayResult struct {
	// SnapshotRevision is the full snapshot's revision; Revision the result's, observed at Time
	// (zero when no revision was applied).
	SnapshotRevision int64     `json:"snapshotRevision"`
	Revision         int64     `json:"revision"`
	Time             time.Time `json:"time,omitzero"`
	Applied          int64     `json:"applied"`
	// Latest is the last revision the archive holds: BumpFor(Latest, Revision) is the restore's bump.
	Latest int64  `json:"latest"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Replay applies the chain at dest onto cfg.Snapshot up to the target, every event checked to be
// the change etcd makes to its key's state before it, and writes what a compaction at the reached
// revision would leave: each key at its last change, with its original revisions, version and
// lease, and a key deleted by then gone. The restore marks that revision compacted, so the result
// serves the source's keyspace at it and nothing below it. The snapshot's other contents (members,
// auth, alarms) are carried over untouched.
func Replay(ctx context.Context, dest Destination, cfg ReplayConfig) (ReplayResult, error) {
	var res ReplayResult
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return res, fmt.Errorf("create %s: %w", cfg.WorkDir, err)
	}
	db := filepath.Join(cfg.WorkDir, "replay.db")
	defer func() { _ = os.Remove(db) }()
	if err := snapshotDB(cfg.Snapshot, db); err != nil {
		return res, err
	}
	s, err := openReplayStore(db)
	if err != nil {
		return res, err
	}
	defer s.close()
	base := s.rev()
	res.SnapshotRevision, res.Revision = base, base
	if err := checkTarget(ctx, dest, cfg, base); err != nil {
		return res, err
	}
	rep, err := walk(ctx, dest, base, cfg.TargetRevision, func(h Header, rec Record) (bool, error) {
		if !cfg.TargetTime.IsZero() && rec.Time.After(cfg.TargetTime) {
			return false, nil
		}
		if err := s.apply(h, rec); err != nil {
			return false, err
		}
		res.Revision, res.Time = rec.Revision, rec.Time
		res.Applied++
		return true, nil
	})
	if err != nil {
		return res, err
	}
	if cfg.TargetRevision > 0 && res.Revision != cfg.TargetRevision {
		return res, &ChainError{Problem: Short, Detail: fmt.Sprintf("reached revision %d; the target is %d", res.Revision, cfg.TargetRevision)}
	}
	last, err := Latest(ctx, dest)
	if err != nil {
		return res, err
	}
	_, res.Latest, _ = ParseName(last)
	res.Latest = max(res.Latest, rep.Last, res.Revision)
	s.write(true)
	res.SHA256, res.Size, err = s.writeSnapshot(cfg.Output)
	if err != nil {
		return res, err
	}
	cfg.Log.Info("replayed", "snapshot", base, "revision", res.Revision, "applied", res.Applied)
	return res, nil
}

// checkTarget refuses a target before the snapshot at revision base: a replay only goes forward.
func checkTarget(ctx context.Context, dest Destination, cfg ReplayConfig, base int64) error {
	if cfg.TargetRevision > 0 && cfg.TargetRevision < base {
		return &BeforeSnapshotError{SnapshotRevision: base, TargetRevision: cfg.TargetRevision}
	}
	if cfg.TargetTime.IsZero() {
		return nil
	}
	// Only the chain knows when the snapshot's revision was committed (about): a chain that
	// starts after it cannot tell, and the replay then stops at the snapshot.
	at, ok, err := observedAt(ctx, dest, base)
	if err != nil {
		return err
	}
	if ok && at.After(cfg.TargetTime) {
		return &BeforeSnapshotError{SnapshotRevision: base, SnapshotTime: at, TargetTime: cfg.TargetTime}
	}
	return nil
}

// BeforeSnapshotError is a target before the full snapshot: a replay only goes forward.
type BeforeSnapshotError struct {
	SnapshotRevision int64
	// SnapshotTime is when the archive observed the snapshot's revision (with a TargetTime only).
	SnapshotTime   time.Time
	TargetRevision int64
	TargetTime     time.Time
}

func (e *BeforeSnapshotError) Error() string {
	const need = "the newest full snapshot at or before the target is needed"
	if !e.TargetTime.IsZero() {
		return fmt.Sprintf("the target time %s is before the full snapshot's revision %d (observed at %s): %s",
			e.TargetTime.UTC().Format(time.RFC3339Nano), e.SnapshotRevision, e.SnapshotTime.UTC().Format(time.RFC3339Nano), need)
	}
	return fmt.Sprintf("the target revision %d is before the full snapshot's revision %d: %s", e.TargetRevision, e.SnapshotRevision, need)
}

// observedAt is when the chain observed revision rev; ok is false when no segment holds it. A
// broken chain here is left to the replay's own walk, which reports it where it matters.
func observedAt(ctx context.Context, dest Destination, rev int64) (time.Time, bool, error) {
	var at time.Time
	found := false
	_, err := walk(ctx, dest, rev-1, rev, func(_ Header, r Record) (bool, error) {
		at, found = r.Time, true
		return false, nil
	})
	var ce *ChainError
	if errors.As(err, &ce) {
		return time.Time{}, false, nil
	}
	return at, found, err
}
