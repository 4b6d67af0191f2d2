package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
)

// Destination holds one chain of segments: a prefix in an S3 bucket or a directory on a volume,
// through the same code backups are stored with (internal/backup).
type Destination interface {
	// List returns the names of the segments (other names are left out).
	List(ctx context.Context) ([]string, error)
	// Put stores a segment whole or not at all.
	Put(ctx context.Context, name string, data []byte) error
	// Get reads a segment whole.
	Get(ctx context.Context, name string) ([]byte, error)
	// Location names a segment for humans.
	Location(name string) string
}

// S3Destination is a prefix of a bucket; S3.Key is the prefix.
type S3Destination struct{ S3 backup.S3 }

func (d *S3Destination) object(name string) *backup.S3 {
	o := d.S3
	o.Key = backup.ObjectKey(d.S3.Key, name)
	return &o
}

// List lists the prefix.
func (d *S3Destination) List(ctx context.Context) ([]string, error) {
	prefix := backup.ObjectKey(d.S3.Key, "")
	keys, err := d.S3.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return segmentNames(keys), nil
}

// Put uploads a segment.
func (d *S3Destination) Put(ctx context.Context, name string, data []byte) error {
	_, err := d.object(name).Put(ctx, data)
	return err
}

// Get downloads a segment.
func (d *S3Destination) Get(ctx context.Context, name string) ([]byte, error) {
	return readAll(ctx, d.object(name))
}

// Location is the segment's URL.
func (d *S3Destination) Location(name string) string { return d.object(name).Location() }

// DirDestination is a directory on a mounted volume; Where names it for humans (pvc://claim/path).
type DirDestination struct {
	Dir   string
	Where string
}

func (d *DirDestination) file(name string) *backup.File {
	return &backup.File{Path: filepath.Join(d.Dir, name), Location: strings.TrimSuffix(d.Where, "/") + "/" + name}
}

// List reads the directory; a missing directory is an empty chain.
func (d *DirDestination) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(d.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Where, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return segmentNames(names), nil
}

// Put writes a segment (synced, renamed into place).
func (d *DirDestination) Put(ctx context.Context, name string, data []byte) error {
	f := d.file(name)
	if err := f.Check(ctx); err != nil {
		return err
	}
	_, err := f.Write(ctx, bytes.NewReader(data))
	return err
}

// Get reads a segment.
func (d *DirDestination) Get(ctx context.Context, name string) ([]byte, error) {
	return readAll(ctx, d.file(name))
}

// Location is the segment's location for humans.
func (d *DirDestination) Location(name string) string { return d.file(name).Location }

// maxSegmentRead bounds what a Get reads: a segment is MaxSegmentBytes plus one watch response.
const maxSegmentRead = 1 << 30

func readAll(ctx context.Context, src backup.Source) ([]byte, error) {
	rc, err := src.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	// A buffer of the object's size from the start: growing it from nothing copies each segment
	// about twice over, a third of a chain walk's garbage.
	var size int64
	switch r := rc.(type) {
	case interface{ Size() int64 }: // an S3 object
		size = r.Size()
	case interface{ Stat() (os.FileInfo, error) }: // a file
		if fi, err := r.Stat(); err == nil {
			size = fi.Size()
		}
	}
	var buf bytes.Buffer
	buf.Grow(int(min(max(size, 0), maxSegmentRead)) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(rc, maxSegmentRead)); err != nil {
		return nil, fmt.Errorf("read segment: %w", err)
	}
	return buf.Bytes(), nil
}

func segmentNames(names []string) []string {
	out := names[:0]
	for _, n := range names {
		if _, _, ok := ParseName(n); ok {
			out = append(out, n)
		}
	}
	return out
}
