package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// syntheticSource is a snapshot and the chain that continues it, written without etcd: the shape
// of the pitr bench's writer (values of 256 bytes, one delete in ten) with a transaction of two
// puts and a delete now and then, every event with the create revision and version etcd would
// give it.
type syntheticSource struct {
	snap     string
	snapRev  int64
	final    int64
	records  []Record
	segments [][]byte
	names    []string
}

// synthesize writes a snapshot holding keys keys (one put each, then a delete of every tenth) and
// revisions revisions after it, perSegment records a segment.
func synthesize(tb testing.TB, keys, revisions, perSegment int) syntheticSource {
	tb.Helper()
	dir := tb.TempDir()
	db := filepath.Join(dir, "full.db")
	lg := zap.NewNop()
	b := backend.New(backend.BackendConfig{Path: db, BatchInterval: time.Hour, BatchLimit: 10_000, MmapSize: backend.InitialMmapSize, UnsafeNoFsync: true, Logger: lg})
	le := lease.NewLessor(lg, b, nil, lease.LessorConfig{})
	kv := mvcc.NewStore(lg, b, le, mvcc.StoreConfig{})
	type state struct{ create, version int64 }
	live := map[string]state{}
	pad := strings.Repeat("v", 256)
	key := func(i int) string { return fmt.Sprintf("/pitr/%04d", i) }
	for i := range keys {
		txn := kv.Write(traceutil.TODO())
		txn.Put([]byte(key(i)), []byte(pad), lease.NoLease)
		txn.End()
		live[key(i)] = state{kv.Rev(), 1}
	}
	for i := 0; i < keys; i += 10 {
		txn := kv.Write(traceutil.TODO())
		txn.DeleteRange([]byte(key(i)), nil)
		txn.End()
		delete(live, key(i))
	}
	src := syntheticSource{snap: filepath.Join(dir, "full.snap"), snapRev: kv.Rev()}
	_ = kv.Close()
	le.Stop()
	_ = b.Close()
	data, err := os.ReadFile(db)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if err := os.WriteFile(src.snap, append(data, sum[:]...), 0o600); err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rev := src.snapRev
	put := func(k string, i int) *mvccpb.Event {
		st, ok := live[k]
		if !ok {
			st = state{rev, 0}
		}
		st.version++
		live[k] = st
		v := fmt.Sprint(i)
		return &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v + pad[len(v):]), CreateRevision: st.create, ModRevision: rev, Version: st.version}}
	}
	del := func(k string) *mvccpb.Event {
		delete(live, k)
		return &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(k), ModRevision: rev}}
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i := 0; rev < src.snapRev+int64(revisions); i++ {
		k := key(rng.IntN(keys))
		_, ok := live[k]
		var evs []*mvccpb.Event
		switch {
		case i%13 == 12:
			// A transaction: two puts and a delete, on three keys.
			k2, k3 := key(rng.IntN(keys)), key(rng.IntN(keys))
			if _, ok3 := live[k3]; !ok3 || k == k2 || k == k3 || k2 == k3 {
				continue
			}
			rev++
			evs = []*mvccpb.Event{put(k, i), put(k2, i), del(k3)}
		case i%10 == 9:
			if !ok {
				continue
			}
			rev++
			evs = []*mvccpb.Event{del(k)}
		default:
			rev++
			evs = []*mvccpb.Event{put(k, i)}
		}
		src.records = append(src.records, Record{Revision: rev, Time: t0.Add(time.Duration(i) * 5 * time.Millisecond), Events: evs})
	}
	var bld builder
	prev := ""
	for i, rec := range src.records {
		if err := bld.add(rec, nil); err != nil {
			tb.Fatal(err)
		}
		if bld.records < perSegment && i < len(src.records)-1 {
			continue
		}
		out, h, sha, err := bld.encode(7, prev)
		if err != nil {
			tb.Fatal(err)
		}
		src.segments, src.names, prev = append(src.segments, out), append(src.names, SegmentName(h.First, h.Last)), sha
		bld.reset()
	}
	src.final = rev
	return src
}

// store puts the chain at dest.
func (s syntheticSource) store(tb testing.TB, dest Destination) {
	tb.Helper()
	for i, n := range s.names {
		if err := dest.Put(context.Background(), n, s.segments[i]); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkReplay replays the pitr bench's chain shape (130,000 revisions over 1,000 keys) from a
// volume and from MinIO on loopback, in one-second segments as the writer stores them (200
// revisions a segment: one a second at 200 writes/s) and as a merge leaves them (13,000 revisions,
// about 4 MiB, a segment); walk is the part of it that only fetches and decodes the segments.
func BenchmarkReplay(b *testing.B) {
	for _, shape := range []struct {
		name       string
		perSegment int
	}{{"1s", 200}, {"merged", 13_000}} {
		b.Run(shape.name, func(b *testing.B) { benchmarkReplay(b, synthesize(b, 1000, 130_000, shape.perSegment)) })
	}
}

func benchmarkReplay(b *testing.B, src syntheticSource) {
	mio := miniotest.Start(b)
	dests := map[string]Destination{
		"dir": &DirDestination{Dir: filepath.Join(b.TempDir(), "chain")},
		"s3":  s3Dest(mio, mio.MakeBucket(b, "bench"), "chain/"),
	}
	for _, name := range []string{"dir", "s3"} {
		dest := dests[name]
		src.store(b, dest)
		b.Run(name+"/list", func(b *testing.B) {
			for b.Loop() {
				if _, err := dest.List(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/walk", func(b *testing.B) {
			self, children := cpuTime(b)
			for b.Loop() {
				if _, err := Verify(context.Background(), dest, src.snapRev, 0); err != nil {
					b.Fatal(err)
				}
			}
			self2, children2 := cpuTime(b)
			b.ReportMetric(float64((self2-self).Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64((children2-children).Milliseconds())/float64(b.N), "minio-cpu-ms/op")
		})
		b.Run(name+"/replay", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				snap := copyFile(b, src.snap)
				out := filepath.Join(b.TempDir(), "out.db")
				b.StartTimer()
				res, err := Replay(context.Background(), dest, ReplayConfig{WorkDir: b.TempDir(), Snapshot: snap, Output: out})
				if err != nil {
					b.Fatal(err)
				}
				if res.Revision != src.final {
					b.Fatalf("replayed to %d, want %d", res.Revision, src.final)
				}
				b.ReportMetric(float64(res.Size)/(1<<20), "MiB")
			}
		})
	}
}

// cpuTime is the CPU time (user and system) of this process and of its children still running
// (MinIO), read from /proc.
func cpuTime(tb testing.TB) (self, children time.Duration) {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// After the command's closing parenthesis: state, ppid, … utime (14th field), stime (15th).
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) < 13 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		children += time.Duration(u+k) * 10 * time.Millisecond // USER_HZ is 100 on Linux
	}
	return self, children
}
