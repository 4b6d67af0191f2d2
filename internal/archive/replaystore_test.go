package archive

import (
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

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

func TestSameChanges(t *testing.T) {
	put := func(key string, create, mod, ver, lease int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, ModRevision: mod, Version: ver, Lease: lease}}
	}
	del := func(key string, mod int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: mod}}
	}
	rec := Record{Revision: 10, Events: []*mvccpb.Event{put("a", 3, 10, 2, 0), put("b", 10, 10, 1, 7), del("c", 10)}}
	same := []mvccpb.KeyValue{
		{Key: []byte("a"), CreateRevision: 3, ModRevision: 10, Version: 2},
		{Key: []byte("b"), CreateRevision: 10, ModRevision: 10, Version: 1, Lease: 7},
		{Key: []byte("c")}, // a delete's change: the key alone
	}
	with := func(f func([]mvccpb.KeyValue) []mvccpb.KeyValue) []mvccpb.KeyValue { return f(slices.Clone(same)) }
	for _, tc := range []struct {
		name string
		got  []mvccpb.KeyValue
		want string
	}{
		{"the source's changes", same, ""},
		{"a delete of a key the store lacks", same[:2], "replayed as 2 changes, the archive holds 3 events"},
		{"another revision", with(func(g []mvccpb.KeyValue) []mvccpb.KeyValue { g[0].ModRevision = 11; return g }), "revision 10 replayed as 11"},
		{"another key", with(func(g []mvccpb.KeyValue) []mvccpb.KeyValue { g[2].Key = []byte("d"); return g }), `replayed key "d"`},
		{"a key the snapshot lacks: created anew", with(func(g []mvccpb.KeyValue) []mvccpb.KeyValue { g[0].CreateRevision, g[0].Version = 10, 1; return g }),
			`key "a" replayed with create revision 10, version 1`},
		{"another version", with(func(g []mvccpb.KeyValue) []mvccpb.KeyValue { g[0].Version = 5; return g }), "version 5"},
		{"another lease", with(func(g []mvccpb.KeyValue) []mvccpb.KeyValue { g[1].Lease = 0; return g }), "lease 0; the archive's 10, 1, 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sameChanges(rec, tc.got)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("sameChanges: %v; want %q", err, tc.want)
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
