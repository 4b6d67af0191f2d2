package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// File is a snapshot file on a mounted volume; Location names it for humans (pvc://claim/path).
type File struct {
	Path     string
	Location string
}

// Check makes sure the directory exists and is writable.
func (f *File) Check(context.Context) error {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fail(reason.WriteFailed, true, "create %s: %w", dir, err)
	}
	return nil
}

// Write stores r under a temporary name, syncs it and renames it into place (and syncs the
// directory), so a crash or a failed stream never leaves a partial file under the final name.
func (f *File) Write(_ context.Context, r io.Reader) (string, error) {
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".part-*")
	if err != nil {
		return "", fail(reason.WriteFailed, false, "create temporary file in %s: %w", dir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		return "", fail(reason.WriteFailed, false, "write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fail(reason.WriteFailed, false, "sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fail(reason.WriteFailed, false, "close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return "", fail(reason.WriteFailed, false, "rename into %s: %w", f.Path, err)
	}
	done = true
	if err := SyncDir(dir); err != nil {
		return "", fail(reason.WriteFailed, false, "%w", err)
	}
	return f.Location, nil
}

// Open reads the file.
func (f *File) Open(context.Context) (io.ReadCloser, error) {
	r, err := os.Open(f.Path)
	if os.IsNotExist(err) {
		return nil, fail(reason.SnapshotNotFound, true, "%s: %w", f.Location, err)
	}
	if err != nil {
		return nil, fail(reason.DownloadFailed, false, "open %s: %w", f.Location, err)
	}
	return r, nil
}

// Delete removes the file (retention); a missing file is not an error.
func (f *File) Delete(context.Context) error {
	if err := os.Remove(f.Path); err != nil && !os.IsNotExist(err) {
		return fail(reason.DeleteFailed, false, "delete %s: %w", f.Location, err)
	}
	return nil
}

// SyncDir makes the creations, renames and deletions in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
