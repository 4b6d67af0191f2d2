package backup

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// PointInTime is the point-in-time part of `worker restore`: flags naming an archive chain and a
// target, and the replay that turns the fetched full snapshot into the snapshot of the target.
// internal/archive implements it; it imports this package, so cmd/worker hands it in.
type PointInTime interface {
	// Register adds the point-in-time flags to fs.
	Register(fs *flag.FlagSet)
	// Check validates the parsed flags against the snapshot's source: s3 is the snapshot's bucket,
	// nil for a --file snapshot. An error is a bad argument.
	Check(s3 *S3Flags) error
	// Requested says whether the parsed flags name an archive; if not, the restore is a plain one.
	Requested() bool
	// Replay turns in.Snapshot (fetched and checked; consumed) into in.Output. Its errors are
	// Failures where it knows the reason (ArchiveChainBroken, PointInTimeUnreachable, S3's).
	Replay(ctx context.Context, in ReplayInput) (PointInTimeResult, error)
}

// ReplayInput is what a point-in-time restore hands the replay: files on the data volume.
type ReplayInput struct {
	// Snapshot is the fetched full snapshot, WorkDir the replay's scratch directory and Output
	// where the replayed snapshot goes; all three next to the data directory.
	Snapshot, WorkDir, Output string
}

// PointInTimeResult describes a point-in-time restore: the full snapshot's revision, the revision
// the chain was replayed to and when the archive observed it (zero when no revision was applied),
// the revisions applied, the last revision the archive holds, and the bump the restore added (the
// restored cluster starts at Revision+Bump, everything before marked compacted).
type PointInTimeResult struct {
	SnapshotRevision int64     `json:"snapshotRevision"`
	Revision         int64     `json:"revision"`
	Time             time.Time `json:"time,omitzero"`
	Applied          int64     `json:"applied"`
	Latest           int64     `json:"latest"`
	Bump             int64     `json:"bump"`
}

// ArchiveChainBroken is a point-in-time restore's failure on an archive chain that cannot be
// replayed (a gap, an overlap, a corrupt or foreign segment): permanent, retries read the same chain.
func ArchiveChainBroken(err error) *Failure {
	return &Failure{Reason: reason.ArchiveChainBroken, Permanent: true, Err: err}
}

// PointInTimeUnreachable is a point-in-time restore's failure on a target this snapshot and chain
// cannot reach (before the snapshot, beyond the chain's end): permanent.
func PointInTimeUnreachable(err error) *Failure {
	return &Failure{Reason: reason.PointInTimeUnreachable, Permanent: true, Err: err}
}

// replayFiles are the scratch paths of a point-in-time restore, derived from --snapshot so that
// they are on the data volume (which holds the snapshot twice already) and found again by the
// next attempt after a restart.
func replayFiles(snapshot string) (workDir, output string) {
	base := strings.TrimSuffix(snapshot, filepath.Ext(snapshot))
	return base + "-replay", base + "-replayed.db"
}

// restorePointInTime is RestoreMain with an archive: fetch and check the full snapshot, replay the
// chain onto it up to the target, and restore the result with a bump past every revision the old
// cluster can have served. A restart at any point starts over: what a killed replay left is cleared
// first (its scratch data directory would otherwise be taken for a finished restore).
func restorePointInTime(ctx context.Context, st *storageFlags, cfg RestoreConfig, want Expect, pit PointInTime, out io.Writer, termLog string) int {
	workDir, output := replayFiles(cfg.Snapshot)
	clean := func() {
		_ = os.RemoveAll(workDir)
		_ = os.Remove(output)
	}
	clean()
	defer clean()
	start := time.Now()
	if _, err := fetchChecked(ctx, st.store(), cfg.Snapshot, want); err != nil {
		return finish(out, termLog, nil, err)
	}
	fetched := time.Now()
	res, err := pit.Replay(ctx, ReplayInput{Snapshot: cfg.Snapshot, WorkDir: workDir, Output: output})
	_ = os.Remove(cfg.Snapshot)
	if err != nil {
		return finish(out, termLog, nil, AsFailure(err, reason.RestoreFailed))
	}
	replayed := time.Now()
	// A larger --bump-revision is kept: any bump past the old cluster's revisions is safe.
	res.Bump = max(res.Bump, cfg.BumpRevision)
	cfg.Snapshot, cfg.BumpRevision = output, res.Bump
	if err := Restore(ctx, cfg); err != nil {
		return finish(out, termLog, nil, err)
	}
	at := "no revision applied"
	if !res.Time.IsZero() {
		at = "observed at " + res.Time.UTC().Format(time.RFC3339Nano)
	}
	_, _ = fmt.Fprintf(out, "restored %s into %s at revision %d (%s): full snapshot at revision %d + %d archived revisions, "+
		"revision bumped by %d and compacted (download %.2fs, replay %.2fs, etcdutl %.2fs)\n",
		cfg.Name, cfg.DataDir, res.Revision, at, res.SnapshotRevision, res.Applied, res.Bump,
		fetched.Sub(start).Seconds(), replayed.Sub(fetched).Seconds(), time.Since(replayed).Seconds())
	if termLog != "" {
		b, _ := json.Marshal(Report{PointInTime: &res})
		_ = os.WriteFile(termLog, b, 0o600)
	}
	return ExitOK
}
