package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// The replay writes into the snapshot's own bbolt database with etcd's storage library, the
// backend, MVCC store and lessor an etcd server runs on: every record is one write transaction,
// so one revision, with no raft, no gRPC and no process around it. Like etcd itself, the MVCC
// index holds every key of the snapshot and of the chain in memory while the replay runs.

const (
	// replayBatchLimit is the writes the backend buffers before it commits: etcd's default.
	// Without fsync a commit is cheap, and larger batches measured slower (the buffers the
	// backend keeps until a commit grow, and the garbage collector scans them), while they
	// would hold more of the replay in memory.
	replayBatchLimit = 10_000
	// replayBatchInterval is long enough that the backend never commits on time alone: the
	// replay commits by batch and once at the end.
	replayBatchInterval = time.Hour
)

// unknownLeaseTTL is granted to a lease whose TTL the writer could not read (it was revoked
// right after the put): its keys' deletion is in the chain when it happened before the target.
const unknownLeaseTTL = 60

// replayStore is the snapshot's database open for the replay. Its lessor is never promoted, as
// on an etcd follower: no lease expires while the chain is applied, and each keeps its TTL.
type replayStore struct {
	b  backend.Backend
	le lease.Lessor
	kv mvcc.KV
}

// openReplayStore opens db, a bare bbolt database that snapshotDB checked.
func openReplayStore(db string) *replayStore {
	lg := zap.NewNop()
	// The database is scratch until the snapshot written at the end: no fsync, a crash starts over.
	b := backend.New(backend.BackendConfig{Path: db, BatchInterval: replayBatchInterval, BatchLimit: replayBatchLimit,
		MmapSize: backend.InitialMmapSize, UnsafeNoFsync: true, Logger: lg})
	le := lease.NewLessor(lg, b, nil, lease.LessorConfig{})
	return &replayStore{b: b, le: le, kv: mvcc.NewStore(lg, b, le, mvcc.StoreConfig{})}
}

// rev is the store's current revision; not for every record (see apply).
func (s *replayStore) rev() int64 { return s.kv.Rev() }

// close releases the store; writeSnapshot already committed what the replay keeps.
func (s *replayStore) close() {
	_ = s.kv.Close()
	s.le.Stop()
	_ = s.b.Close()
}

// apply writes rec as one transaction, checked to land at its original revision with the keys'
// original create revisions, versions and leases: else the chain does not continue the snapshot.
func (s *replayStore) apply(h Header, rec Record) error {
	// Granting takes the backend's write lock, which the transaction holds: leases first.
	for _, ev := range rec.Events {
		if ev.Type == mvccpb.PUT && ev.Kv.Lease != 0 {
			if err := s.grant(ev.Kv.Lease, h.Leases[strconv.FormatInt(ev.Kv.Lease, 10)]); err != nil {
				return err
			}
		}
	}
	txn := s.kv.Write(traceutil.TODO())
	for _, ev := range rec.Events {
		if ev.Type == mvccpb.DELETE {
			txn.DeleteRange(ev.Kv.Key, nil)
			continue
		}
		txn.Put(ev.Kv.Key, ev.Kv.Value, lease.LeaseID(ev.Kv.Lease))
	}
	// The revision the transaction made, without the store's Rev: that opens a read transaction,
	// which copies every write buffered since the last commit.
	landed := txn.Rev()
	if len(txn.Changes()) > 0 {
		landed++
	}
	err := sameChanges(rec, txn.Changes())
	txn.End()
	if err == nil && landed != rec.Revision {
		err = fmt.Errorf("revision %d replayed as %d", rec.Revision, landed)
	}
	if err != nil {
		return &ChainError{Problem: Mismatch, Detail: err.Error() + ": the chain does not continue this snapshot"}
	}
	return nil
}

// grant creates a lease under its original ID, unless the snapshot or an earlier record brought
// it; ttl 0 is a lease the writer found gone.
func (s *replayStore) grant(id, ttl int64) error {
	if s.le.Lookup(lease.LeaseID(id)) != nil {
		return nil
	}
	if ttl <= 0 {
		ttl = unknownLeaseTTL
	}
	if _, err := s.le.Grant(lease.LeaseID(id), ttl); err != nil {
		return fmt.Errorf("grant lease %x: %w", id, err)
	}
	return nil
}

// sameChanges compares what replaying rec changed with what the source's rec did: one change per
// event, same keys, and for puts the revision, create revision, version and lease the source's
// store gave them. A delete's change carries its key only; its revision is the store's.
func sameChanges(rec Record, got []mvccpb.KeyValue) error {
	if len(got) != len(rec.Events) {
		return fmt.Errorf("revision %d replayed as %d changes, the archive holds %d events (a delete of a key the store lacks)",
			rec.Revision, len(got), len(rec.Events))
	}
	for i, ev := range rec.Events {
		g, w := got[i], ev.Kv
		switch {
		case !bytes.Equal(g.Key, w.Key):
			return fmt.Errorf("revision %d event %d: replayed key %q, the archive's %q", rec.Revision, i, g.Key, w.Key)
		case ev.Type == mvccpb.DELETE:
		case g.ModRevision != w.ModRevision:
			return fmt.Errorf("revision %d replayed as %d", w.ModRevision, g.ModRevision)
		case g.CreateRevision != w.CreateRevision || g.Version != w.Version || g.Lease != w.Lease:
			return fmt.Errorf("revision %d key %q replayed with create revision %d, version %d, lease %x; the archive's %d, %d, %x",
				rec.Revision, w.Key, g.CreateRevision, g.Version, g.Lease, w.CreateRevision, w.Version, w.Lease)
		}
	}
	return nil
}

// snapshotDB moves the snapshot file (etcd's `snapshot save` format: the bbolt database followed
// by the SHA-256 of its bytes) to db as a bare database, checked as etcdutl checks a restore's:
// the hash, then bbolt's own open. Moved, not copied: a replay consumes the snapshot.
func snapshotDB(snapshot, db string) error {
	size, err := checkSnapshotHash(snapshot)
	if err != nil {
		return err
	}
	if err := moveFile(snapshot, db); err != nil {
		return err
	}
	if err := os.Truncate(db, size-sha256.Size); err != nil {
		return fmt.Errorf("strip the SHA-256 of %s: %w", db, err)
	}
	// backend.New panics on a file bbolt cannot open: try it here, read-only, for an error.
	bdb, err := bbolt.Open(db, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return corrupt("the snapshot's database: %w", err)
	}
	return bdb.Close()
}

// checkSnapshotHash checks the SHA-256 etcd appends to a snapshot and returns the file's size.
func checkSnapshotHash(snapshot string) (int64, error) {
	f, err := os.Open(snapshot)
	if err != nil {
		return 0, fmt.Errorf("open the snapshot: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat the snapshot: %w", err)
	}
	// bbolt databases are whole pages; etcd's snapshot stream adds the 32-byte hash.
	size := st.Size()
	if size%512 != sha256.Size {
		return 0, corrupt("%s (%d bytes) does not end with a snapshot's SHA-256", snapshot, size)
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.LimitReader(f, size-sha256.Size), make([]byte, 1<<20)); err != nil {
		return 0, fmt.Errorf("hash the snapshot: %w", err)
	}
	recorded := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, recorded); err != nil {
		return 0, fmt.Errorf("read the snapshot's SHA-256: %w", err)
	}
	if sum := h.Sum(nil); !bytes.Equal(sum, recorded) {
		return 0, corrupt("%s: the database's SHA-256 is %x, the snapshot records %x", snapshot, sum, recorded)
	}
	return size, nil
}

func corrupt(format string, a ...any) error {
	return &backup.Failure{Reason: reason.SnapshotCorrupt, Permanent: true, Err: fmt.Errorf(format, a...)}
}

// moveFile renames src to dst, or copies it across file systems.
func moveFile(src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, syscall.EXDEV) {
		if err != nil {
			return fmt.Errorf("move the snapshot to %s: %w", dst, err)
		}
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open the snapshot: %w", err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy the snapshot to %s: %w", dst, err)
	}
	return os.Remove(src)
}

// writeSnapshot commits the store and writes its database to path in etcd's `snapshot save`
// format, the SHA-256 of the database appended, so that etcdutl restores it as any snapshot and
// checks the hash. It returns the file's SHA-256 and size. No fsync: the restore reads the file
// right away, and one that starts over after a crash replays again.
func (s *replayStore) writeSnapshot(path string) (string, int64, error) {
	snap := s.b.Snapshot()
	defer func() { _ = snap.Close() }()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", 0, fmt.Errorf("create %s: %w", path, err)
	}
	// One hash serves both sums: Sum leaves the state as it was, so the file's hash goes on
	// from the database's.
	h := sha256.New()
	n, err := snap.WriteTo(io.MultiWriter(f, h))
	if err == nil {
		var m int
		m, err = io.MultiWriter(f, h).Write(h.Sum(nil))
		n += int64(m)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", 0, fmt.Errorf("write the replay's snapshot to %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
