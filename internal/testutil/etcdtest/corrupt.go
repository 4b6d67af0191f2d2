package etcdtest

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// WaitApplied waits until every member of ms has applied what the most advanced one has: a follower
// applies an entry a moment after the leader acknowledged it, and a member stopped before that has
// the entry in its WAL but not yet in its database file.
func WaitApplied(t testing.TB, ms []*Member) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var lo, hi uint64
		for i, m := range ms {
			a := m.Etcd.Server.AppliedIndex()
			if i == 0 || a < lo {
				lo = a
			}
			hi = max(hi, a)
		}
		if lo == hi {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("members applied %d..%d after 10s", lo, hi)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CorruptFollower stops a member of ms that is not the leader, once every member has applied what
// the leader has, and changes key's stored value in its database file (CorruptValue); the caller
// restarts it with the configuration it wants to test.
func CorruptFollower(t testing.TB, ms []*Member, key, value string) *Member {
	t.Helper()
	follower := ms[len(ms)-1]
	if uint64(follower.Etcd.Server.Leader()) == uint64(follower.Etcd.Server.MemberID()) {
		follower = ms[len(ms)-2]
	}
	WaitApplied(t, ms) // the follower's database file holds the value changed below
	follower.Stop()
	CorruptValue(t, follower, key, value)
	return follower
}

// CorruptValue changes, in place, every stored revision of key in the stopped member's database
// file, the way a bad disk or a bug would: raft and the WAL know nothing of it, so the member serves
// the changed value once restarted and its HashKV differs from its peers'.
func CorruptValue(t testing.TB, m *Member, key, value string) {
	t.Helper()
	CorruptDB(t, filepath.Join(m.dir, "member", "snap", "db"), key, value)
}

// CorruptDB changes, in place, every stored revision of key in the etcd database file at path (a
// stopped member's member/snap/db), as CorruptValue does.
func CorruptDB(t testing.TB, path, key, value string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	changed := 0
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		return b.ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return err
			}
			if string(kv.Key) != key {
				return nil
			}
			kv.Value = []byte(value)
			out, err := kv.Marshal()
			if err != nil {
				return err
			}
			changed++
			return b.Put(bytes.Clone(k), out)
		})
	})
	if err != nil || changed == 0 {
		t.Fatalf("corrupt %s in %s: changed %d revisions, %v", key, path, changed, err)
	}
}
