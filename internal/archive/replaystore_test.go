package archive

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// TestFollows: the replay takes an event only as the change etcd makes to the key's state before
// it; anything else means the chain does not continue what the replay holds.
func TestFollows(t *testing.T) {
	put := func(key string, create, mod, ver int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, ModRevision: mod, Version: ver}}
	}
	del := func(key string, mod int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: mod}}
	}
	live := keyState{live: true, create: 3, version: 2}
	for _, tc := range []struct {
		name string
		prev keyState
		ev   *mvccpb.Event
		next keyState
		want string
	}{
		{"an update", live, put("a", 3, 10, 3), keyState{live: true, create: 3, version: 3}, ""},
		{"a creation", keyState{}, put("a", 10, 10, 1), keyState{live: true, create: 10, version: 1}, ""},
		{"a delete", live, del("a", 10), keyState{}, ""},
		{"an event of another revision", live, put("a", 3, 11, 3), live, "revision 10 holds an event of key \"a\" at revision 11"},
		{"a delete of a key that does not exist", keyState{}, del("a", 10), keyState{}, "deletes key \"a\", which does not exist"},
		{"an update of a key that does not exist", keyState{}, put("a", 3, 10, 3), keyState{}, "create revision 3, version 3; it follows create revision 10, version 1"},
		{"a creation of a key that exists", live, put("a", 10, 10, 1), live, "create revision 10, version 1; it follows create revision 3, version 3"},
		{"a version skipped", live, put("a", 3, 10, 4), live, "version 4; it follows create revision 3, version 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := follows(tc.prev, tc.ev, 10)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("follows: %v; want %q", err, tc.want)
			}
			if next != tc.next {
				t.Errorf("state after: %+v, want %+v", next, tc.next)
			}
		})
	}
}

// boltSnapshot writes a small bbolt database at path with etcd's SHA-256 trailer, as `snapshot
// save` writes one, and returns the database's bytes.
func boltSnapshot(t *testing.T, path string) []byte {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("key")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if err := os.WriteFile(path, append(slices.Clone(data), sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSnapshotDBChecksTheSnapshot: the replay takes a snapshot only as etcdutl would restore it,
// its SHA-256 trailer right and the database one bbolt opens; what it refuses is SnapshotCorrupt.
func TestSnapshotDBChecksTheSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(snap []byte) []byte
		corrupt bool
	}{
		{"as saved", func(s []byte) []byte { return s }, false},
		{"a flipped byte", func(s []byte) []byte { s[100] ^= 1; return s }, true},
		{"no SHA-256 (a bare database)", func(s []byte) []byte { return s[:len(s)-sha256.Size] }, true},
		{"a whole hash over something else than bbolt", func(s []byte) []byte {
			junk := make([]byte, len(s)-sha256.Size)
			sum := sha256.Sum256(junk)
			return append(junk, sum[:]...)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			snap, db := filepath.Join(dir, "full.db"), filepath.Join(dir, "replay.db")
			want := boltSnapshot(t, snap)
			data, err := os.ReadFile(snap)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(snap, tc.damage(data), 0o600); err != nil {
				t.Fatal(err)
			}
			err = snapshotDB(snap, db)
			if !tc.corrupt {
				got, rerr := os.ReadFile(db)
				if err != nil || rerr != nil || !slices.Equal(got, want) {
					t.Fatalf("snapshotDB: %v, %v; want the bare database (%d bytes, got %d)", err, rerr, len(want), len(got))
				}
				if _, err := os.Stat(snap); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the snapshot is left (%v); the replay consumes it", err)
				}
				return
			}
			if f := backup.AsFailure(err, reason.RestoreFailed); err == nil || f.Reason != reason.SnapshotCorrupt || !f.Permanent {
				t.Fatalf("snapshotDB: %v; want a permanent SnapshotCorrupt", err)
			}
		})
	}
}

// replayedSource is a source etcd whose chain, across a full snapshot, holds puts, deletes, a
// transaction and leases (one the snapshot brings, one granted after it), with the snapshot and
// the last revision.
type replayedSource struct {
	cl             *clientv3.Client
	dest           Destination
	snap           string
	snapRev, final int64
}

// archiveAcrossSnapshot archives cl (the writer on its own client, writerCl) and saves a snapshot
// with cl amid the chain.
func archiveAcrossSnapshot(t *testing.T, cl, writerCl *clientv3.Client) replayedSource {
	t.Helper()
	ctx := context.Background()
	dest := &DirDestination{Dir: filepath.Join(t.TempDir(), "chain")}
	w := startWriter(t, &Writer{Client: writerCl, Dest: dest, FlushInterval: 50 * time.Millisecond, MaxSegmentBytes: 1, StartRevision: head(t, cl) + 1})
	held, err := cl.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, "held", "by a lease in the snapshot", clientv3.WithLease(held.ID)); err != nil {
		t.Fatal(err)
	}
	writeRevisions(t, cl, w, 3)
	snap := filepath.Join(t.TempDir(), "full.db")
	saveSnapshot(t, cl, snap)
	snapRev := head(t, cl)
	writeRevisions(t, cl, w, 6)
	later, err := cl.Grant(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"later", "a lease after the snapshot"}, {"held2", "the snapshot's lease again"}} {
		id := later.ID
		if kv[0] == "held2" {
			id = held.ID
		}
		if _, err := cl.Put(ctx, kv[0], kv[1], clientv3.WithLease(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Put(ctx, "held", "moved off its lease"); err != nil {
		t.Fatal(err)
	}
	final := head(t, cl)
	w.waitArchived(t, final)
	w.kill(t)
	return replayedSource{cl: cl, dest: dest, snap: snap, snapRev: snapRev, final: final}
}

// saveSnapshot writes cl's snapshot stream to path as `etcdctl snapshot save` does.
func saveSnapshot(t *testing.T, cl *clientv3.Client, path string) {
	t.Helper()
	rc, err := cl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// replayToEnd replays src's chain onto its snapshot and checks the result's file is what the
// result says.
func replayToEnd(t *testing.T, src replayedSource) (string, ReplayResult) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "replayed.db")
	res, err := Replay(context.Background(), src.dest, ReplayConfig{WorkDir: t.TempDir(), Snapshot: src.snap, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != src.final || res.Latest != src.final {
		t.Fatalf("replayed to %d (latest %d), want %d", res.Revision, res.Latest, src.final)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); fmt.Sprintf("%x", sum) != res.SHA256 || int64(len(data)) != res.Size || res.Size%512 != sha256.Size {
		t.Fatalf("result %s (%d bytes), reported %s (%d bytes): want a snapshot with its SHA-256", fmt.Sprintf("%x", sum), len(data), res.SHA256, res.Size)
	}
	return out, res
}

// sameLeases compares the leases of two clusters: IDs, granted TTLs and attached keys.
func sameLeases(t *testing.T, got, want *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	describe := func(cl *clientv3.Client) []string {
		resp, err := cl.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range resp.Leases {
			ttl, err := cl.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]string, 0, len(ttl.Keys))
			for _, k := range ttl.Keys {
				keys = append(keys, string(k))
			}
			slices.Sort(keys)
			out = append(out, fmt.Sprintf("%x ttl %d keys %v", l.ID, ttl.GrantedTTL, keys))
		}
		slices.Sort(out)
		return out
	}
	if g, w := describe(got), describe(want); !slices.Equal(g, w) {
		t.Fatalf("leases %v, want %v", g, w)
	}
}

// TestReplayRestoresOnEverySupportedEtcd: the replay writes with this operator's etcd storage
// library whatever the cluster's version; the result must restore with each supported release's
// own etcdutl (which checks the SHA-256: no --skip-hash-check) and serve on its etcd the source's
// keyspace, revisions, versions and leases included. Each source is that release's etcd.
func TestReplayRestoresOnEverySupportedEtcd(t *testing.T) {
	dirs := map[string]string{"3.5.0": "etcd-v3.5/", "3.6.0": "", "3.7.0": "etcd-v3.7/"}
	for _, v := range versions.Supported {
		t.Run(v, func(t *testing.T) {
			dir, ok := dirs[versions.MinorOf(v)]
			if !ok {
				t.Fatalf("no binaries known for etcd %s", v)
			}
			etcd, etcdutl := binaryPath(t, dir+"etcd"), binaryPath(t, dir+"etcdutl")
			source := etcdtest.NewMemberURLs(t, "src")
			cl := runEtcd(t, etcd, source, filepath.Join(t.TempDir(), "data"), "source")
			src := archiveAcrossSnapshot(t, cl, dial(t, source.ClientURL))
			out, res := replayToEnd(t, src)

			m := etcdtest.NewMemberURLs(t, "r0")
			data := filepath.Join(t.TempDir(), "data")
			bump := BumpFor(res.Latest, res.Revision)
			if err := backup.Restore(context.Background(), backup.RestoreConfig{Etcdutl: etcdutl, Snapshot: out, DataDir: data, Name: m.Name,
				InitialCluster: m.Name + "=" + m.PeerURL, InitialClusterToken: "restored", InitialAdvertisePeerURLs: m.PeerURL, BumpRevision: bump}); err != nil {
				t.Fatalf("etcdutl %s: %v", v, err)
			}
			restored := runEtcd(t, etcd, m, data, "restored")
			if st, err := restored.Status(context.Background(), m.ClientURL); err != nil || !strings.HasPrefix(st.Version, strings.TrimSuffix(versions.MinorOf(v), "0")) {
				t.Fatalf("the restored member runs etcd %v (%v), want %s", st, err, v)
			}
			if err := sameKeyspace(keyspace(t, restored, 0), keyspace(t, cl, src.final)); err != nil {
				t.Fatal(err)
			}
			if h := head(t, restored); h != src.final+bump {
				t.Fatalf("restored revision %d, want %d + bump %d", h, src.final, bump)
			}
			sameLeases(t, restored, cl)
		})
	}
}

// runEtcd runs the etcd binary as member m on dataDir until the test ends and returns a client of it.
func runEtcd(t *testing.T, etcd string, m *etcdtest.Member, dataDir, token string) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, etcd, "--name="+m.Name, "--data-dir="+dataDir, "--log-level=error",
		"--listen-peer-urls="+m.PeerURL, "--initial-advertise-peer-urls="+m.PeerURL, "--initial-cluster="+m.Name+"="+m.PeerURL,
		"--listen-client-urls="+m.ClientURL, "--advertise-client-urls="+m.ClientURL, "--initial-cluster-token="+token)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	cl := dial(t, m.ClientURL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		gctx, gcancel := context.WithTimeout(ctx, time.Second)
		_, err := cl.Get(gctx, "health")
		gcancel()
		if err == nil {
			return cl
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve: %v\n%s", etcd, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReplayOfAnAuthEnabledCluster: the replay needs no credentials (it writes the database, not
// through etcd's API), and the snapshot's users, roles and auth switch come through unchanged.
func TestReplayOfAnAuthEnabledCluster(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	admin := dial(t, ms[0].ClientURL)
	if _, err := admin.RoleAdd(ctx, "reader"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RoleGrantPermission(ctx, "reader", "k", "l", clientv3.PermissionType(clientv3.PermRead)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.UserAdd(ctx, "alice", "pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.UserGrantRole(ctx, "alice", "reader"); err != nil {
		t.Fatal(err)
	}
	etcdtest.EnableAuth(t, admin)
	root := dialAs(t, "root", "secret", ms[0].ClientURL)
	src := archiveAcrossSnapshot(t, root, dialAs(t, "root", "secret", ms[0].ClientURL))
	out, res := replayToEnd(t, src)

	anonymous := restoreAndServe(t, out, BumpFor(res.Latest, res.Revision))
	if _, err := anonymous.Get(ctx, "k0"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Fatalf("a read without a user: %v, want %v (auth still on)", err, rpctypes.ErrUserEmpty)
	}
	restored := dialAs(t, "root", "secret", anonymous.Endpoints()[0])
	if err := sameKeyspace(keyspace(t, restored, 0), keyspace(t, root, src.final)); err != nil {
		t.Fatal(err)
	}
	users, err := restored.UserList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alice", "root"}; !slices.Equal(users.Users, want) {
		t.Fatalf("users %v, want %v", users.Users, want)
	}
	role, err := restored.RoleGet(ctx, "reader")
	if err != nil || len(role.Perm) != 1 || string(role.Perm[0].Key) != "k" || string(role.Perm[0].RangeEnd) != "l" {
		t.Fatalf("role reader: %+v, %v; want read on [k, l)", role, err)
	}
	alice := dialAs(t, "alice", "pw", anonymous.Endpoints()[0])
	if _, err := alice.Get(ctx, "k1"); err != nil {
		t.Fatalf("alice reads k1: %v", err)
	}
	if _, err := alice.Put(ctx, "k1", "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("alice writes k1: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
}

// TestReplayRefusesAChainThatDoesNotContinueTheSnapshot: a snapshot of another cluster at the
// chain's starting revision. Its revisions line up, so only the keys tell: the chain's first
// update of a key the snapshot lacks replays as a creation, which the replay refuses.
func TestReplayRefusesAChainThatDoesNotContinueTheSnapshot(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	src := archiveAcrossSnapshot(t, dial(t, ms[0].ClientURL), dial(t, ms[0].ClientURL))
	other := dial(t, etcdtest.StartCluster(t, 1)[0].ClientURL)
	for head(t, other) < src.snapRev {
		if _, err := other.Put(ctx, "other", "cluster"); err != nil {
			t.Fatal(err)
		}
	}
	snap := filepath.Join(t.TempDir(), "other.db")
	saveSnapshot(t, other, snap)
	_, err := Replay(ctx, src.dest, ReplayConfig{WorkDir: t.TempDir(), Snapshot: snap, Output: filepath.Join(t.TempDir(), "out.db")})
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Problem != Mismatch || !strings.Contains(err.Error(), "the chain does not continue this snapshot") {
		t.Fatalf("replay onto another cluster's snapshot: %v; want a Mismatch", err)
	}
}

// TestMoveFileAcrossFileSystems: `worker archive replay` may be given a --work-dir on another file
// system than --snapshot, where a rename fails; the snapshot is then copied and removed.
func TestMoveFileAcrossFileSystems(t *testing.T) {
	other, err := os.MkdirTemp("/dev/shm", "replay")
	if err != nil {
		t.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(other) })
	src, dst := filepath.Join(other, "full.db"), filepath.Join(t.TempDir(), "replay.db")
	if err := os.WriteFile(src, []byte("snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(src, dst); err == nil {
		t.Skip("/dev/shm and the test's directory are one file system")
	}
	if err := moveFile(src, dst); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(dst); err != nil || string(got) != "snapshot" {
		t.Fatalf("moved file: %q, %v", got, err)
	}
	if _, err := os.Stat(src); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the source is left (%v)", err)
	}
}

// TestReplayLeavesWhatACompactionAtTheTargetLeaves: the replay's database, opened by etcd's own
// store and compacted at the target as the restore marks it, holds the keyspace of a plain
// replay of every event (values, create and mod revisions, versions), and etcd's index built from
// it continues each key where the source left it: the next put gets the next version of the same
// creation, a put of a deleted key starts a new one. Whether the replay writes once at the end or
// spills at every record.
func TestReplayLeavesWhatACompactionAtTheTargetLeaves(t *testing.T) {
	src := synthesize(t, 300, 6000, 150)
	dest := &DirDestination{Dir: filepath.Join(t.TempDir(), "chain")}
	src.store(t, dest)
	// A target that only deletes: its tombstone has to carry the revision.
	deletes := src.records[len(src.records)/3]
	for _, rec := range src.records[len(src.records)/3:] {
		if len(rec.Events) == 1 && rec.Events[0].Type == mvccpb.DELETE {
			deletes = rec
			break
		}
	}
	for _, tc := range []struct {
		name   string
		target int64
		budget int
	}{
		{"to the end", 0, replayValueBudget},
		{"to a revision amid a segment", src.snapRev + 3001, replayValueBudget},
		{"to a revision that only deletes", deletes.Revision, replayValueBudget},
		{"to the first revision", src.snapRev + 1, replayValueBudget},
		{"to the snapshot's own revision", src.snapRev, replayValueBudget},
		{"spilling at every record", 0, 1},
		{"spilling at every record, to a revision that only deletes", deletes.Revision, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(b int) { replayValueBudget = b }(replayValueBudget)
			replayValueBudget = tc.budget
			want := openStore(t, src.snap)
			target := cmp.Or(tc.target, src.final)
			for _, rec := range src.records {
				if rec.Revision > target {
					break
				}
				txn := want.Write(traceutil.TODO())
				for _, ev := range rec.Events {
					if ev.Type == mvccpb.DELETE {
						txn.DeleteRange(ev.Kv.Key, nil)
					} else {
						txn.Put(ev.Kv.Key, ev.Kv.Value, lease.NoLease)
					}
				}
				txn.End()
			}
			out := filepath.Join(t.TempDir(), "replayed.db")
			res, err := Replay(context.Background(), dest, ReplayConfig{WorkDir: t.TempDir(), Snapshot: copyFile(t, src.snap), TargetRevision: tc.target, Output: out})
			if err != nil {
				t.Fatal(err)
			}
			got := openStore(t, out)
			if res.Revision != target || got.Rev() != target || want.Rev() != target {
				t.Fatalf("replayed to %d, the database is at %d, the reference at %d; want %d", res.Revision, got.Rev(), want.Rev(), target)
			}
			for _, kv := range []mvcc.KV{got, want} {
				done, err := kv.Compact(traceutil.TODO(), target)
				if err != nil {
					t.Fatal(err)
				}
				<-done
			}
			all := func(kv mvcc.KV) []*mvccpb.KeyValue {
				r, err := kv.Range(context.Background(), []byte{0}, []byte{0xff}, mvcc.RangeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				out := make([]*mvccpb.KeyValue, len(r.KVs))
				for i := range r.KVs {
					out[i] = &r.KVs[i]
				}
				return out
			}
			if err := sameKeyspace(all(got), all(want)); err != nil {
				t.Fatal(err)
			}
			// The next writes: every key of the chain, deleted or not, and one never written.
			for _, k := range []string{"/pitr/0000", "/pitr/0001", "/pitr/0150", "/pitr/0299", "never"} {
				for _, kv := range []mvcc.KV{got, want} {
					kv.Put([]byte(k), []byte("next"), lease.NoLease)
				}
			}
			for _, rec := range src.records {
				for _, ev := range rec.Events {
					for _, kv := range []mvcc.KV{got, want} {
						kv.Put(ev.Kv.Key, []byte("next"), lease.NoLease)
					}
				}
			}
			if err := sameKeyspace(all(got), all(want)); err != nil {
				t.Fatalf("after more puts: %v", err)
			}
		})
	}
}

// openStore opens a copy of snap's database (its SHA-256 trailer stripped) with etcd's store.
func openStore(t *testing.T, snap string) mvcc.KV {
	t.Helper()
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(db, data[:len(data)-sha256.Size], 0o600); err != nil {
		t.Fatal(err)
	}
	lg := zap.NewNop()
	b := backend.NewDefaultBackend(lg, db)
	le := lease.NewLessor(lg, b, nil, lease.LessorConfig{})
	kv := mvcc.NewStore(lg, b, le, mvcc.StoreConfig{})
	t.Cleanup(func() { _ = kv.Close(); le.Stop(); _ = b.Close() })
	return kv
}
