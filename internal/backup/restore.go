package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Source is where a snapshot is read from (*S3 or *File).
type Source interface {
	Open(ctx context.Context) (io.ReadCloser, error)
}

// Expect is what a snapshot must be, from its EtcdBackup record; empty fields are not checked
// (a raw source has no record: etcdutl still checks the hash etcd appends to every snapshot).
type Expect struct {
	SHA256 string
	Size   int64
}

// Fetch copies src to path, and refuses it (removing it) unless it matches want: a tampered or
// truncated snapshot never reaches etcdutl. The file is scratch, read once by etcdutl right after
// (from the page cache) and fetched again by any later attempt, so it is not synced: that would
// wait for a whole database's worth of disk writes on the restore's critical path.
func Fetch(ctx context.Context, src Source, path string, want Expect) error {
	rc, err := src.Open(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	hr := newHashingReader(rc)
	if err := writeScratch(path, hr); err != nil {
		return AsFailure(err, reason.DownloadFailed)
	}
	bad := ""
	if want.Size > 0 && hr.n != want.Size {
		bad = fmt.Sprintf("size %d, recorded %d", hr.n, want.Size)
	}
	if got := hr.sum(); want.SHA256 != "" && got != want.SHA256 {
		bad = strings.TrimPrefix(bad+"; ", "; ") + fmt.Sprintf("sha256 %s, recorded %s", got, want.SHA256)
	}
	if bad != "" {
		_ = os.Remove(path)
		return fail(reason.SnapshotChecksumMismatch, true, "snapshot refused: %s", bad)
	}
	return nil
}

func writeScratch(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(reason.DownloadFailed, false, "create %s: %w", path, err)
	}
	// Large reads: a 32 KiB copy loop costs ~0.5 s more per GiB (the hash and the S3 client's
	// per-read overhead); hiding the file's ReadFrom keeps io.Copy from falling back to it.
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, r, make([]byte, 1<<20))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fail(reason.DownloadFailed, false, "write %s: %w", path, err)
	}
	return nil
}

// RestoreConfig is one member's restore: etcdutl of the cluster's etcd version turns the snapshot
// into the member's data directory under a new cluster ID.
type RestoreConfig struct {
	// Etcdutl is the path of the version-matched etcdutl binary.
	Etcdutl string
	// Snapshot is the local snapshot file; removed once the data directory is in place.
	Snapshot string
	// DataDir is the member's final --data-dir.
	DataDir                  string
	Name                     string
	InitialCluster           string
	InitialClusterToken      string
	InitialAdvertisePeerURLs string
	// BumpRevision, when positive, restores with the revision raised by that much and everything
	// up to the new revision marked compacted (etcdutl allows the one only with the other): a
	// kube-apiserver that watched the old cluster gets "compacted" and re-lists instead of missing
	// changes (a point-in-time restore goes back in time, and its revisions would otherwise repeat
	// ones the old cluster already served with other contents).
	BumpRevision int64
}

// DefaultBumpMargin is the revision bump of every restore the operator runs: past anything the old
// cluster served after the snapshot (or, for a point-in-time restore, after the archive's last
// revision: its last second, or a time the archive was down). 10⁹ revisions are eleven days at
// 1,000 writes per second. Every member restoring the same snapshot gets the same bump, so their
// revisions agree.
const DefaultBumpMargin = 1_000_000_000

// Restored says whether dataDir already holds a member (an earlier run finished, or etcd ran).
func Restored(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "member"))
	return err == nil
}

// Restore runs etcdutl into a staging directory next to DataDir and renames it into place, so a
// restart at any point either finds the finished data directory or starts over cleanly.
func Restore(ctx context.Context, cfg RestoreConfig) error {
	if Restored(cfg.DataDir) {
		return nil
	}
	staging := cfg.DataDir + ".restoring"
	if err := os.RemoveAll(staging); err != nil {
		return fail(reason.RestoreFailed, false, "clear %s: %w", staging, err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, cfg.Etcdutl, "snapshot", "restore", cfg.Snapshot,
		"--data-dir="+staging,
		"--name="+cfg.Name,
		"--initial-cluster="+cfg.InitialCluster,
		"--initial-cluster-token="+cfg.InitialClusterToken,
		"--initial-advertise-peer-urls="+cfg.InitialAdvertisePeerURLs)
	if cfg.BumpRevision > 0 {
		cmd.Args = append(cmd.Args, fmt.Sprintf("--bump-revision=%d", cfg.BumpRevision), "--mark-compacted")
	}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := lastLines(out.String(), 5)
		// etcdutl checks the SHA-256 etcd appends to every snapshot and the bbolt file itself; it
		// says so only in its message.
		why := reason.RestoreFailed
		if strings.Contains(msg, "sha256") || strings.Contains(msg, "hash") || strings.Contains(msg, "integrity") || strings.Contains(msg, "invalid database") {
			why = reason.SnapshotCorrupt
		}
		_ = os.RemoveAll(staging)
		return fail(why, why == reason.SnapshotCorrupt, "etcdutl snapshot restore: %v: %s", err, msg)
	}
	// etcd refuses a data directory that is not private to its user.
	if err := os.Chmod(staging, 0o700); err != nil {
		return fail(reason.RestoreFailed, false, "chmod %s: %w", staging, err)
	}
	// A previous etcd may have left an empty (member-less) data dir; rename cannot replace it.
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		return fail(reason.RestoreFailed, false, "clear %s: %w", cfg.DataDir, err)
	}
	if err := os.Rename(staging, cfg.DataDir); err != nil {
		return fail(reason.RestoreFailed, false, "rename %s to %s: %w", staging, cfg.DataDir, err)
	}
	if err := SyncDir(filepath.Dir(cfg.DataDir)); err != nil {
		return fail(reason.RestoreFailed, false, "%w", err)
	}
	_ = os.Remove(cfg.Snapshot)
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
