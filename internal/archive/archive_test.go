package archive

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// load writes until stopped: puts, deletes, multi-key transactions, puts under a long lease and
// under short leases that expire (whose expiry is a revision of deletes the source makes itself).
func load(t *testing.T, cl *clientv3.Client) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	long, err := cl.Grant(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			k := fmt.Sprintf("/registry/k%03d", i%150)
			v := fmt.Sprintf("v%d", i)
			// Errors during a leader change are expected; the test compares what etcd committed.
			switch {
			case i%13 == 0:
				if l, err := cl.Grant(ctx, 2); err == nil {
					_, _ = cl.Put(ctx, fmt.Sprintf("/events/e%d", i), v, clientv3.WithLease(l.ID))
				}
			case i%11 == 0:
				_, _ = cl.Txn(ctx).Then(clientv3.OpPut(k+"a", v), clientv3.OpPut(k+"b", v), clientv3.OpDelete(k)).Commit()
			case i%7 == 0:
				_, _ = cl.Delete(ctx, k)
			case i%5 == 0:
				_, _ = cl.Put(ctx, k, v, clientv3.WithLease(long.ID))
			default:
				_, _ = cl.Put(ctx, k, v)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// moveLeader hands leadership to another member.
func moveLeader(t *testing.T, ms []*etcdtest.Member) {
	t.Helper()
	ctx := context.Background()
	for _, m := range ms {
		one := dial(t, m.ClientURL)
		st, err := one.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if st.Header.MemberId != st.Leader {
			continue
		}
		for _, o := range ms {
			if id := uint64(o.Etcd.Server.MemberID()); id != st.Leader {
				if _, err := one.MoveLeader(ctx, id); err != nil {
					t.Fatalf("move leader: %v", err)
				}
				t.Logf("leader moved from %x to %x", st.Leader, id)
				return
			}
		}
	}
	t.Fatal("no leader to move")
}

// TestArchiveThroughKillAndLeaderChangesReplaysToPastRevisions is the story of a continuous
// archive: a writer ships a busy cluster to MinIO, is killed mid-stream (what it had in memory
// is lost), the leader moves while no writer runs and again under the next writer, which resumes
// from the last durable segment. The chain then verifies continuous from the full snapshot, and
// replays to 5 random past revisions and to a past instant each equal the source's keyspace at
// that revision (every key, value, revision, version and lease), restored with a bumped revision
// marked compacted.
func TestArchiveThroughKillAndLeaderChangesReplaysToPastRevisions(t *testing.T) {
	ctx := context.Background()
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "archive")
	ms := etcdtest.StartCluster(t, 3)
	eps := etcdtest.ClientURLs(ms)
	cl := dial(t, eps...)
	for i := range 20 {
		if _, err := cl.Put(ctx, fmt.Sprintf("/registry/seed%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	dest := s3Dest(mio, bucket, "/prod/chain/")
	// A writer starts the chain after the revision it first reads unless told where: here the
	// quiet cluster's, whatever the goroutine's start races with.
	from := head(t, cl) + 1
	newWriter := func() *Writer {
		return &Writer{Client: dial(t, eps...), Dest: dest, FlushInterval: 200 * time.Millisecond, MaxSegmentBytes: 8 << 10, StartRevision: from}
	}
	w1 := startWriter(t, newWriter())
	full := &backup.S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: "prod/full.db", PathStyle: true,
		AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}
	snap, err := backup.Take(ctx, eps, nil, full)
	if err != nil {
		t.Fatal(err)
	}
	if h := head(t, cl); snap.Revision != h {
		t.Fatalf("the snapshot's revision %d is not the quiet cluster's %d", snap.Revision, h)
	}

	stopLoad := load(t, cl)
	time.Sleep(1500 * time.Millisecond)
	w1.waitArchived(t, head(t, cl))
	w1.kill(t)
	time.Sleep(time.Second)
	moveLeader(t, ms)
	w2 := startWriter(t, newWriter())
	time.Sleep(time.Second)
	moveLeader(t, ms)
	time.Sleep(time.Second)
	stopLoad()
	time.Sleep(3 * time.Second) // the last short leases expire: revisions too
	final := head(t, cl)
	w2.waitArchived(t, final)
	w2.kill(t)

	rep, err := Verify(ctx, dest, snap.Revision, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First != snap.Revision+1 || rep.Last != final || rep.Revisions != final-snap.Revision {
		t.Fatalf("verified %+v; want revisions %d to %d", rep, snap.Revision+1, final)
	}
	t.Logf("chain: %d revisions in %d segments", rep.Revisions, rep.Segments)
	if rep.Segments < 5 {
		t.Fatalf("%d segments: the test wants a chain of many", rep.Segments)
	}

	local := filepath.Join(t.TempDir(), "full.db")
	if err := backup.Fetch(ctx, full, local, backup.Expect{SHA256: snap.SHA256, Size: snap.Size}); err != nil {
		t.Fatal(err)
	}
	times := map[int64]time.Time{}
	if _, err := walk(ctx, dest, snap.Revision, 0, func(_ Header, r Record) (bool, error) { times[r.Revision] = r.Time; return true, nil }); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	replayTo := func(target int64, at time.Time) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "replayed.db")
		res, err := Replay(ctx, dest, ReplayConfig{WorkDir: t.TempDir(),
			Snapshot: copyFile(t, local), TargetRevision: target, TargetTime: at, Output: out})
		if err != nil {
			t.Fatalf("replay to %d/%v: %v", target, at, err)
		}
		want := target
		if !at.IsZero() {
			for rev, tm := range times {
				if !tm.After(at) && rev > want {
					want = rev
				}
			}
		}
		if res.Revision != want || res.SnapshotRevision != snap.Revision || res.Latest != final {
			t.Fatalf("replay to %d/%v: %+v; want revision %d from %d, latest %d", target, at, res, want, snap.Revision, final)
		}
		bump := BumpFor(res.Latest, res.Revision)
		restored := restoreAndServe(t, out, bump)
		if err := sameKeyspace(keyspace(t, restored, 0), keyspace(t, cl, want)); err != nil {
			t.Fatalf("revision %d: %v", want, err)
		}
		if h := head(t, restored); h != want+bump {
			t.Fatalf("restored revision %d, want %d + bump %d", h, want, bump)
		}
		// A watcher of the old cluster resuming at any revision it saw gets "compacted" and re-lists.
		if _, err := restored.Get(ctx, "/registry/k000", clientv3.WithRev(final)); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatalf("read at the old cluster's revision %d after the restore: %v, want compacted", final, err)
		}
		t.Logf("revision %d (snapshot %d + %d applied): keyspace equal", want, res.SnapshotRevision, res.Applied)
	}
	for range 5 {
		replayTo(snap.Revision+1+rng.Int64N(final-snap.Revision), time.Time{})
	}
	at := times[snap.Revision+1+rng.Int64N(final-snap.Revision)]
	replayTo(0, at)
}

// TestCompactionOutrunningTheArchiveIsATypedError: a writer down while the source compacts past
// what it stored cannot continue the chain and says so with *CompactedError; after a full
// snapshot the chain restarts past it, and a verification across the hole finds the gap.
func TestCompactionOutrunningTheArchiveIsATypedError(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	dest := &DirDestination{Dir: filepath.Join(t.TempDir(), "chain"), Where: "pvc://backups/chain"}
	start := head(t, cl)
	w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, FlushInterval: 100 * time.Millisecond, StartRevision: start + 1})
	for i := range 10 {
		if _, err := cl.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	archived := head(t, cl)
	w.waitArchived(t, archived)
	w.kill(t)
	for i := range 10 {
		if _, err := cl.Put(ctx, fmt.Sprintf("k%d", i), "w"); err != nil {
			t.Fatal(err)
		}
	}
	compacted := head(t, cl)
	if _, err := cl.Compact(ctx, compacted); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := (&Writer{Client: dial(t, ms[0].ClientURL), Dest: dest}).Run(rctx)
	var ce *CompactedError
	if !errors.As(err, &ce) || ce.Next != archived+1 || ce.Compacted != compacted {
		t.Fatalf("writer after the compaction: %v; want *CompactedError{Next: %d, Compacted: %d}", err, archived+1, compacted)
	}

	// The way out: a full snapshot (here: the compacted revision), and the chain goes on after it.
	w = startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, StartRevision: compacted + 1, FlushInterval: 100 * time.Millisecond})
	if _, err := cl.Put(ctx, "after", "v"); err != nil {
		t.Fatal(err)
	}
	w.waitArchived(t, compacted+1)
	w.kill(t)
	if rep, err := Verify(ctx, dest, compacted, 0); err != nil || rep.Last != compacted+1 {
		t.Fatalf("chain after the new snapshot: %+v, %v", rep, err)
	}
	var chainErr *ChainError
	if _, err := Verify(ctx, dest, start, 0); !errors.As(err, &chainErr) || chainErr.Problem != Gap {
		t.Fatalf("chain across the compaction: %v; want a Gap", err)
	}
}

// TestVerifyFindsBrokenChains: a chain verified whole fails, at the right segment, once a
// segment is flipped, missing, overlapped, misnamed or named over the one before it (read as a
// merged segment, whose contents then disagree with its name); a chain that starts after the snapshot
// has a gap; a replay beyond the chain's end is refused.
func TestVerifyFindsBrokenChains(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	dir := filepath.Join(t.TempDir(), "chain")
	dest := &DirDestination{Dir: dir, Where: "pvc://backups/chain"}
	start := head(t, cl)
	w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, MaxSegmentBytes: 1, StartRevision: start + 1})
	for i := range 6 {
		resp, err := cl.Put(ctx, fmt.Sprintf("k%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		w.waitArchived(t, resp.Header.Revision) // one revision per watch response, so per segment
	}
	w.kill(t)
	names, err := dest.List(ctx)
	if err != nil || len(names) != 6 {
		t.Fatalf("segments %v (%v); want one per revision", names, err)
	}
	sort.Strings(names)
	if _, err := Verify(ctx, dest, start, 0); err != nil {
		t.Fatal(err)
	}
	broken := func(name string, change func(d string), want Problem) {
		t.Helper()
		saved := map[string][]byte{}
		for _, n := range names {
			saved[n], _ = os.ReadFile(filepath.Join(dir, n))
		}
		change(dir)
		_, err := Verify(ctx, dest, start, 0)
		var ce *ChainError
		if !errors.As(err, &ce) || ce.Problem != want || ce.Segment != dest.Location(name) {
			t.Errorf("%s: %v; want %s at %s", want, err, want, name)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
		for n, b := range saved {
			_ = os.WriteFile(filepath.Join(dir, n), b, 0o600)
		}
	}
	at := func(i int) string { return filepath.Join(dir, names[i]) }
	broken(names[2], func(string) {
		b, _ := os.ReadFile(at(2))
		b[len(b)/2] ^= 1
		_ = os.WriteFile(at(2), b, 0o600)
	}, Corrupt)
	broken(names[3], func(string) { _ = os.Remove(at(2)) }, Gap)
	// A segment named over the one before it covers it, as a merged segment covers its parts: the
	// walk uses it, and its contents are not what its name says.
	f, l, _ := ParseName(names[4])
	broken(SegmentName(f-1, l), func(string) { _ = os.Rename(at(4), filepath.Join(dir, SegmentName(f-1, l))) }, Mismatch)
	// Two segments that overlap without one holding the other: segments 3 and 4 merged, and
	// segment 5 named as if it started at 4.
	f, l, _ = ParseName(names[5])
	broken(SegmentName(f-1, l), func(string) {
		if err := mergeGroup(ctx, dest, names[3:5]); err != nil {
			t.Fatal(err)
		}
		_ = os.Rename(at(5), filepath.Join(dir, SegmentName(f-1, l)))
	}, Overlap)
	f, l, _ = ParseName(names[5])
	broken(SegmentName(f, l+1), func(string) { _ = os.Rename(at(5), filepath.Join(dir, SegmentName(f, l+1))) }, Mismatch)
	broken(names[3], func(string) { b, _ := os.ReadFile(at(4)); _ = os.WriteFile(at(3), b, 0o600) }, Mismatch)
	// Segment 3 rewritten whole and valid (its range, cluster and SHA-256 right) but not after 2.
	broken(names[3], func(string) {
		b, _ := os.ReadFile(at(3))
		seg, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		var rb builder
		for _, r := range seg.Records {
			if err := rb.add(r, func(int64) int64 { return 0 }); err != nil {
				t.Fatal(err)
			}
		}
		id, _ := strconv.ParseUint(seg.Header.ClusterID, 16, 64)
		data, _, _, err := rb.encode(id, seg.Header.PrevSHA256+"0")
		if err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(at(3), data, 0o600)
	}, Mismatch)

	var ce *ChainError
	if _, err := Verify(ctx, dest, start-1, 0); !errors.As(err, &ce) || ce.Problem != Gap {
		t.Errorf("a snapshot older than the chain: %v; want a Gap", err)
	}
	if _, err := Verify(ctx, dest, start, head(t, cl)+5); !errors.As(err, &ce) || ce.Problem != Short {
		t.Errorf("a target past the chain: %v; want Short", err)
	}
}

// TestAnotherClusterCannotContinueAChain: a destination holds one cluster's chain; a writer for
// another cluster refuses it instead of appending revisions of another history.
func TestAnotherClusterCannotContinueAChain(t *testing.T) {
	ctx := context.Background()
	dest := &DirDestination{Dir: filepath.Join(t.TempDir(), "chain"), Where: "pvc://backups/chain"}
	a := etcdtest.StartCluster(t, 1)
	acl := dial(t, a[0].ClientURL)
	w := startWriter(t, &Writer{Client: acl, Dest: dest, FlushInterval: 50 * time.Millisecond, StartRevision: head(t, acl) + 1})
	if _, err := acl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	w.waitArchived(t, head(t, acl))
	w.kill(t)
	b := etcdtest.StartCluster(t, 1)
	bcl := dial(t, b[0].ClientURL)
	for range 10 { // ahead of a: the cluster ID is what tells them apart
		if _, err := bcl.Put(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := (&Writer{Client: bcl, Dest: dest}).Run(rctx); !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("writer of another cluster: %v; want ErrOtherCluster", err)
	}
}
