package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// The replay writes into the snapshot's own bbolt database with etcd's storage library (its
// backend, bucket layout and encodings), with no raft, no gRPC, no MVCC store and no process around
// it. The restore marks everything up to the (bumped) target revision compacted, so no revision
// before the target can be read afterwards: the replay writes what a compaction at the target would
// leave (replay.go), each key the chain touched once, at its last revision at or before the target,
// with its original create revision, version and lease, and a key deleted by then not at all.
// Every event is still checked against the key's state before it, as etcd would have made it.

// replayValueBudget is the most bytes of collapsed values held in memory: past it, what was
// collapsed so far is written to the database (spill) and the values are dropped. The key states
// held besides are as many as the keys etcd's own index holds for the same keyspace. A variable
// for the test that spills at every record.
var replayValueBudget = 64 << 20

// unknownLeaseTTL is granted to a lease whose TTL the writer could not read (it was revoked
// right after the put): its keys' deletion is in the chain when it happened before the target.
const unknownLeaseTTL = 60

// tombstoneMark ends the bucket key of a deletion (etcd's mvcc marks it so; its revision type
// cannot make a marked key outside the package).
const tombstoneMark = 't'

// keyState is a key as etcd's index knows it: live or not, and the live key's create revision
// and version.
type keyState struct {
	live            bool
	create, version int64
}

// follows checks that ev, an event of revision rev, is the change etcd makes to a key in state
// prev, and returns the key's state after it.
func follows(prev keyState, ev *mvccpb.Event, rev int64) (keyState, error) {
	kv := ev.Kv
	switch {
	case kv.ModRevision != rev:
		return prev, fmt.Errorf("revision %d holds an event of key %q at revision %d", rev, kv.Key, kv.ModRevision)
	case ev.Type == mvccpb.DELETE && !prev.live:
		return prev, fmt.Errorf("revision %d deletes key %q, which does not exist", rev, kv.Key)
	case ev.Type == mvccpb.DELETE:
		return keyState{}, nil
	}
	want := keyState{live: true, create: rev, version: 1}
	if prev.live {
		want.create, want.version = prev.create, prev.version+1
	}
	if kv.CreateRevision != want.create || kv.Version != want.version {
		return prev, fmt.Errorf("revision %d puts key %q with create revision %d, version %d; it follows create revision %d, version %d",
			rev, kv.Key, kv.CreateRevision, kv.Version, want.create, want.version)
	}
	return want, nil
}

// dbKey is one key of the database being written: its state after the last revision collapsed,
// the bucket keys it has in the database, and the change not yet written.
type dbKey struct {
	state  keyState
	stored []mvcc.BucketKey
	// final is the last put, not yet written; nil when the last change is a delete or written.
	final    *mvccpb.KeyValue
	finalSub int64
	dirty    bool
}

// replayStore is the snapshot's database open for the replay, with every key's state (the
// snapshot's and the chain's) and the changes collapsed since the last write.
type replayStore struct {
	b      backend.Backend
	keys   map[string]*dbKey
	dirty  []string
	leases map[int64]bool
	grants []*leasepb.Lease
	// pending is the bytes of the values held in dirty keys' finals.
	pending int
	// last is the last revision collapsed (the snapshot's before the first); lastDelete the last
	// delete event of it, lastPut whether it puts.
	last       int64
	lastDelete *mvccpb.Event
	lastSub    int64
	lastPut    bool
}

// openReplayStore opens db, a bare bbolt database that snapshotDB checked, and reads its keys'
// states and its revision, as etcd's store does when it opens one.
func openReplayStore(db string) (*replayStore, error) {
	lg := zap.NewNop()
	// The database is scratch until the snapshot written at the end: no fsync, a crash starts over.
	// The replay commits itself (ForceCommit), never on time or size.
	b := backend.New(backend.BackendConfig{Path: db, BatchInterval: time.Hour, BatchLimit: math.MaxInt,
		MmapSize: backend.InitialMmapSize, UnsafeNoFsync: true, Logger: lg})
	s := &replayStore{b: b, keys: map[string]*dbKey{}, leases: map[int64]bool{}}
	if err := s.read(); err != nil {
		_ = b.Close()
		return nil, err
	}
	return s, nil
}

// read loads the database's keys, revision and leases.
func (s *replayStore) read() error {
	tx := s.b.BatchTx()
	tx.LockOutsideApply()
	defer tx.Unlock()
	err := tx.UnsafeForEach(schema.Key, func(k, v []byte) error {
		var kv mvccpb.KeyValue
		if err := kv.Unmarshal(v); err != nil {
			return corrupt("the snapshot's key at %x: %w", k, err)
		}
		bk := mvcc.BytesToBucketKey(k)
		e := s.keys[string(kv.Key)]
		if e == nil {
			e = &dbKey{}
			s.keys[string(kv.Key)] = e
		}
		e.stored = append(e.stored, bk)
		e.state = keyState{}
		if !mvcc.IsTombstone(k) {
			e.state = keyState{live: true, create: kv.CreateRevision, version: kv.Version}
		}
		s.last = max(s.last, bk.Main)
		return nil
	})
	if err != nil {
		return err
	}
	// A compaction may have removed the revision's own change (a delete); etcd's store takes the
	// compaction's revision as its own then.
	finished, _ := mvcc.UnsafeReadFinishedCompact(tx)
	scheduled, _ := mvcc.UnsafeReadScheduledCompact(tx)
	s.last = max(s.last, finished, scheduled)
	for _, l := range schema.MustUnsafeGetAllLeases(tx) {
		s.leases[l.ID] = true
	}
	return nil
}

// rev is the revision of what the store holds once written: the snapshot's or the last collapsed.
func (s *replayStore) rev() int64 { return s.last }

// close releases the store; writeSnapshot already committed what the replay keeps.
func (s *replayStore) close() { _ = s.b.Close() }

// apply collapses rec into the keys' states, each event checked to be the change etcd makes to
// the key's state before it (else the chain does not continue the snapshot); it writes what was
// collapsed when the values held exceed replayValueBudget.
func (s *replayStore) apply(h Header, rec Record) error {
	s.lastDelete, s.lastPut = nil, false
	for i, ev := range rec.Events {
		e := s.keys[string(ev.Kv.Key)]
		if e == nil {
			e = &dbKey{}
			s.keys[string(ev.Kv.Key)] = e
		}
		next, err := follows(e.state, ev, rec.Revision)
		if err != nil {
			return &ChainError{Problem: Mismatch, Detail: err.Error() + ": the chain does not continue this snapshot"}
		}
		e.state = next
		if !e.dirty {
			e.dirty = true
			s.dirty = append(s.dirty, string(ev.Kv.Key))
		}
		if e.final != nil {
			s.pending -= len(e.final.Value)
		}
		e.final, e.finalSub = nil, int64(i)
		if ev.Type == mvccpb.DELETE {
			s.lastDelete, s.lastSub = ev, int64(i)
			continue
		}
		e.final = ev.Kv
		s.pending += len(ev.Kv.Value)
		s.lastPut = true
		if id := ev.Kv.Lease; id != 0 && !s.leases[id] {
			// A lease the snapshot and the chain so far lack is granted with the TTL the writer read.
			ttl := h.Leases[strconv.FormatInt(id, 10)]
			if ttl <= 0 {
				ttl = unknownLeaseTTL
			}
			s.leases[id] = true
			s.grants = append(s.grants, &leasepb.Lease{ID: id, TTL: ttl})
		}
	}
	s.last = rec.Revision
	if s.pending > replayValueBudget {
		s.write(false)
	}
	return nil
}

// write writes what was collapsed since the last write in one transaction, as a compaction at
// the last collapsed revision would leave it: every earlier revision of a changed key deleted,
// its last put kept. A delete leaves no revision, except at the end when the last revision only
// deletes: one tombstone then carries the revision, which etcdutl takes as the snapshot's (etcd
// restores a lone tombstone as a deleted key, and its compaction at the bumped revision drops it).
func (s *replayStore) write(end bool) {
	tx := s.b.BatchTx()
	tx.LockOutsideApply()
	slices.Sort(s.dirty)
	buf := mvcc.NewRevBytes()
	for _, key := range s.dirty {
		e := s.keys[key]
		for _, bk := range e.stored {
			tx.UnsafeDelete(schema.Key, mvcc.BucketKeyToBytes(bk, buf))
		}
		e.stored = e.stored[:0]
		if e.final != nil {
			// bbolt keeps the key and value it is given until the commit: both fresh.
			k := mvcc.RevToBytes(mvcc.Revision{Main: e.final.ModRevision, Sub: e.finalSub}, mvcc.NewRevBytes())
			v, err := e.final.Marshal()
			if err != nil {
				panic(fmt.Sprintf("marshal a decoded key: %v", err)) // decoded from the same type: cannot fail
			}
			tx.UnsafePut(schema.Key, k, v)
			e.stored = append(e.stored, mvcc.BytesToBucketKey(k))
		}
		e.final, e.dirty = nil, false
		if !e.state.live && len(e.stored) == 0 {
			delete(s.keys, key)
		}
	}
	if d := s.lastDelete; end && d != nil && !s.lastPut {
		v, err := (&mvccpb.KeyValue{Key: d.Kv.Key}).Marshal()
		if err != nil {
			panic(fmt.Sprintf("marshal a tombstone: %v", err)) // a key alone: cannot fail
		}
		tx.UnsafePut(schema.Key, append(mvcc.RevToBytes(mvcc.Revision{Main: s.last, Sub: s.lastSub}, mvcc.NewRevBytes()), tombstoneMark), v)
	}
	for _, l := range s.grants {
		schema.MustUnsafePutLease(tx, l)
	}
	s.dirty, s.grants, s.pending = s.dirty[:0], nil, 0
	tx.Unlock()
	s.b.ForceCommit()
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
