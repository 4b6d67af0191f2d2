package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// ManifestSuffix ends the name of the manifest stored beside every full snapshot: the snapshot's
// key or file name with it appended (b1.db → b1.db.manifest.json).
const ManifestSuffix = ".manifest.json"

// ManifestFormat is the version of the manifest layout this package writes and reads.
const ManifestFormat = 1

// maxManifestSize bounds what a manifest read takes into memory: a real one is a few hundred bytes.
const maxManifestSize = 64 << 10

// Manifest is what a full snapshot claims to be, stored beside it by the backup Job. The EtcdBackup
// records the same SHA-256 and size; the manifest also serves restores of a raw object (no
// EtcdBackup) and outlives a deleted or re-created record. The keyspace hash lets a test-restore
// prove the restored keys are the source's, not only that the file is the one written.
type Manifest struct {
	Format      int    `json:"format"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	Revision    int64  `json:"revision"`
	Member      string `json:"member"`
	ClusterID   string `json:"clusterID,omitempty"`
	EtcdVersion string `json:"etcdVersion"`
	// Keyspace is etcd's HashKV of the member the snapshot came from, at a revision the snapshot
	// holds; nil when the member could not compute it (the snapshot is then still checked by bytes).
	Keyspace *KeyspaceHash `json:"keyspace,omitempty"`
}

// KeyspaceHash is etcd's HashKV: a hash of every key revision up to Revision that the compaction
// at CompactRevision kept. Two stores agree on it only when compacted at the same revision, so a
// hash is compared only with one computed after the same compaction.
type KeyspaceHash struct {
	Hash            uint32 `json:"hash"`
	Revision        int64  `json:"revision"`
	CompactRevision int64  `json:"compactRevision"`
}

// Comparable says whether other was computed over the same revisions as k, so that different
// hashes mean different data (a compaction in between changes the hash of identical data).
func (k KeyspaceHash) Comparable(other KeyspaceHash) bool {
	return k.Revision == other.Revision && k.CompactRevision == other.CompactRevision
}

// manifestStore is where the manifest of the snapshot at src lives; ok is false for sources that
// have no place beside them (a test's stream).
func manifestStore(src any) (store, bool) {
	switch s := src.(type) {
	case *S3:
		m := *s
		m.Key += ManifestSuffix
		return &m, true
	case *File:
		loc := s.Location
		if loc != "" {
			loc += ManifestSuffix
		}
		return &File{Path: s.Path + ManifestSuffix, Location: loc}, true
	}
	return nil, false
}

// writeManifest stores m beside the snapshot at sink, whole or not at all (as the snapshot).
func writeManifest(ctx context.Context, sink Sink, m Manifest) (string, error) {
	st, ok := manifestStore(sink)
	if !ok {
		return "", nil
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode manifest: %w", err)
	}
	if s3, ok := st.(*S3); ok {
		return s3.Put(ctx, b)
	}
	return st.Write(ctx, bytes.NewReader(b))
}

// ReadManifest reads the manifest stored beside the snapshot at src; nil without an error when
// there is none (a backup taken before manifests existed, or a raw object): such a snapshot is
// unverified, never corrupt. A manifest that cannot be parsed is an error: a snapshot's claim that
// was changed is as suspect as changed bytes.
func ReadManifest(ctx context.Context, src Source) (*Manifest, error) {
	st, ok := manifestStore(src)
	if !ok {
		return nil, nil
	}
	rc, err := st.Open(ctx)
	var f *Failure
	if errors.As(err, &f) && f.Reason == reason.SnapshotNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the manifest: %w", err)
	}
	defer func() { _ = rc.Close() }()
	raw, err := io.ReadAll(io.LimitReader(rc, maxManifestSize+1))
	if err != nil {
		return nil, fail(reason.DownloadFailed, false, "read the manifest: %w", err)
	}
	var m Manifest
	if len(raw) > maxManifestSize || json.Unmarshal(raw, &m) != nil || m.Format != ManifestFormat || m.SHA256 == "" {
		return nil, fail(reason.ManifestMismatch, true, "the manifest beside the snapshot is not a format %d manifest (%d bytes)", ManifestFormat, len(raw))
	}
	return &m, nil
}

// manifestAgrees checks the manifest stored beside a snapshot (m; nil when there is none) against
// the EtcdBackup's record of it (empty fields when there is none). A record and a manifest that
// disagree are refused: one of them was changed.
func manifestAgrees(record Expect, m *Manifest) error {
	if m == nil {
		return nil
	}
	if record.SHA256 != "" && record.SHA256 != m.SHA256 {
		return fail(reason.ManifestMismatch, true, "the manifest beside the snapshot records SHA-256 %s, the backup's record %s", m.SHA256, record.SHA256)
	}
	if record.Size > 0 && m.Size > 0 && record.Size != m.Size {
		return fail(reason.ManifestMismatch, true, "the manifest beside the snapshot records %d bytes, the backup's record %d", m.Size, record.Size)
	}
	return nil
}

// fetchChecked is Fetch against the record and the manifest beside src: what every restore and
// test-restore reads a snapshot with. The bytes are checked against the record when there is one
// (SnapshotChecksumMismatch), else against the manifest; then the manifest against the record
// (ManifestMismatch). It returns the manifest (nil when there is none: unverified, not refused).
func fetchChecked(ctx context.Context, src Source, path string, record Expect) (*Manifest, error) {
	m, err := ReadManifest(ctx, src)
	if err != nil {
		return nil, err
	}
	want := record
	if want.SHA256 == "" && m != nil {
		want = Expect{SHA256: m.SHA256, Size: m.Size}
	}
	if err := Fetch(ctx, src, path, want); err != nil {
		return nil, err
	}
	if err := manifestAgrees(record, m); err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return m, nil
}

// CorruptVerdict says whether a failed test-restore's reason means the stored backup is not what
// it claims (changed bytes, a changed manifest, a keyspace that is not its source's, a file etcdutl
// rejects): the operator then marks it corrupt and never restores it. Other failures (the store
// could not be read, the throwaway etcd did not start) say nothing about the backup itself.
func CorruptVerdict(why reason.Reason) bool {
	switch why {
	case reason.SnapshotChecksumMismatch, reason.ManifestMismatch, reason.KeyspaceHashMismatch, reason.SnapshotCorrupt:
		return true
	}
	return false
}
