package archive

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
)

// PointInTime is `worker restore`'s point-in-time part (backup.PointInTime): the chain next to
// the full snapshot (an S3 prefix in the snapshot's bucket, with its endpoint, SSE and
// credentials, or a directory on the volume the snapshot file is on), the target, and the replay.
type PointInTime struct {
	prefix, dir, location string
	targetRevision        int64
	targetTime            string

	dest Destination
	at   time.Time
}

var _ backup.PointInTime = (*PointInTime)(nil)

// Register adds --archive-prefix, --archive-dir, --archive-location, --target-revision and
// --target-time.
func (p *PointInTime) Register(fs *flag.FlagSet) {
	fs.StringVar(&p.prefix, "archive-prefix", "", "S3 key prefix of the archive's segments, in the snapshot's bucket: restore to a point in time")
	fs.StringVar(&p.dir, "archive-dir", "", "directory of the archive's segments on the snapshot file's volume: restore to a point in time")
	fs.StringVar(&p.location, "archive-location", "", "the archive directory's location for humans, e.g. pvc://claim/path")
	fs.Int64Var(&p.targetRevision, "target-revision", 0, "last revision to restore (0: the end of the archive)")
	fs.StringVar(&p.targetTime, "target-time", "", "RFC 3339 time: restore the revisions observed at or before it")
}

// Check refuses flags that do not name one archive beside the snapshot and at most one target.
func (p *PointInTime) Check(s3 *backup.S3Flags) error {
	switch {
	case p.prefix != "" && p.dir != "":
		return errors.New("--archive-prefix and --archive-dir exclude each other")
	case p.prefix != "" && s3 == nil:
		return errors.New("--archive-prefix needs the snapshot in S3 (--s3-bucket): the archive is in the snapshot's bucket")
	case p.dir != "" && s3 != nil:
		return errors.New("--archive-dir needs the snapshot on the volume (--file), not in S3")
	case !p.Requested() && (p.targetRevision != 0 || p.targetTime != ""):
		return errors.New("--target-revision and --target-time need --archive-prefix or --archive-dir")
	case p.targetRevision < 0:
		return fmt.Errorf("--target-revision %d is negative", p.targetRevision)
	case p.targetRevision > 0 && p.targetTime != "":
		return errors.New("--target-revision and --target-time exclude each other")
	}
	if p.targetTime != "" {
		at, err := time.Parse(time.RFC3339Nano, p.targetTime)
		if err != nil {
			return fmt.Errorf("--target-time: %w", err)
		}
		p.at = at
	}
	switch {
	case p.prefix != "":
		p.dest = &S3Destination{S3: *s3.S3(p.prefix)}
	case p.dir != "":
		where := p.location
		if where == "" {
			where = p.dir
		}
		p.dest = &DirDestination{Dir: p.dir, Where: where}
	}
	return nil
}

// Requested says whether an archive is named.
func (p *PointInTime) Requested() bool { return p.prefix != "" || p.dir != "" }

// Replay replays the chain onto the full snapshot up to the target; the bump is BumpFor the result.
func (p *PointInTime) Replay(ctx context.Context, in backup.ReplayInput) (backup.PointInTimeResult, error) {
	log := funcr.NewJSON(func(obj string) { _, _ = fmt.Fprintln(os.Stderr, obj) }, funcr.Options{})
	res, err := Replay(ctx, p.dest, ReplayConfig{WorkDir: in.WorkDir, Snapshot: in.Snapshot,
		TargetRevision: p.targetRevision, TargetTime: p.at, Output: in.Output, Log: log})
	if err != nil {
		return backup.PointInTimeResult{}, restoreFailure(err)
	}
	return backup.PointInTimeResult{SnapshotRevision: res.SnapshotRevision, Revision: res.Revision, Time: res.Time,
		Applied: res.Applied, Latest: res.Latest, Bump: BumpFor(res.Latest, res.Revision)}, nil
}

// restoreFailure gives a replay's error the reason the operator reports: a target out of reach
// and a broken chain are permanent (the same snapshot and chain fail the same way); S3's and the
// restore's own failures keep theirs; anything else is retried.
func restoreFailure(err error) error {
	var before *BeforeSnapshotError
	var chain *ChainError
	var f *backup.Failure
	switch {
	case errors.As(err, &before):
		return backup.PointInTimeUnreachable(err)
	case errors.As(err, &chain) && chain.Problem == Short:
		return backup.PointInTimeUnreachable(fmt.Errorf("the target is beyond the archive's last revision: %w", err))
	case errors.As(err, &chain):
		return backup.ArchiveChainBroken(err)
	case errors.As(err, &f):
		return &backup.Failure{Reason: f.Reason, Permanent: f.Permanent, Err: err}
	}
	return fmt.Errorf("point-in-time replay: %w", err)
}
