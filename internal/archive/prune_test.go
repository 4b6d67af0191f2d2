package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

func TestPruneDecision(t *testing.T) {
	seg := SegmentName
	chain := []string{seg(21, 30), seg(1, 10), "tmp.part", seg(11, 20), seg(31, 40)}
	for _, tc := range []struct {
		name       string
		names      []string
		before     int64
		drop       bool
		del, keeps []string
	}{
		{"nothing before the bound", chain, 5, false, nil, []string{seg(1, 10), seg(11, 20), seg(21, 30), seg(31, 40)}},
		{"the segment holding the bound stays", chain, 10, false, nil, []string{seg(1, 10), seg(11, 20), seg(21, 30), seg(31, 40)}},
		{"a segment ending just before the bound goes", chain, 11, false, []string{seg(1, 10)}, []string{seg(11, 20), seg(21, 30), seg(31, 40)}},
		{"oldest first", chain, 25, false, []string{seg(1, 10), seg(11, 20)}, []string{seg(21, 30), seg(31, 40)}},
		{"the newest stays when the bound is past it", chain, 100, false, []string{seg(1, 10), seg(11, 20), seg(21, 30)}, []string{seg(31, 40)}},
		{"a gap left by a restart after a compaction", []string{seg(1, 10), seg(50, 60), seg(61, 70)}, 55, false, []string{seg(1, 10)}, []string{seg(50, 60), seg(61, 70)}},
		{"drop takes everything, oldest first", chain, 0, true, []string{seg(1, 10), seg(11, 20), seg(21, 30), seg(31, 40)}, nil},
		{"an empty chain", nil, 10, false, nil, nil},
		{"a lone segment is the newest", []string{seg(1, 10)}, 100, false, nil, []string{seg(1, 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.names)
			del, keep := PruneDecision(tc.names, tc.before, tc.drop)
			if !slices.Equal(del, tc.del) || !slices.Equal(keep, tc.keeps) {
				t.Errorf("delete %v keep %v; want delete %v keep %v", del, keep, tc.del, tc.keeps)
			}
			if !slices.Equal(in, tc.names) {
				t.Errorf("the listing was changed: %v", tc.names)
			}
		})
	}
}

// chainOfOneRevisionSegments archives n revisions, one per segment, and returns their revisions.
func chainOfOneRevisionSegments(t *testing.T, endpoint string, dest Destination, n int) []int64 {
	t.Helper()
	cl := dial(t, endpoint)
	w := startWriter(t, &Writer{Client: dial(t, endpoint), Dest: dest, MaxSegmentBytes: 1, StartRevision: head(t, cl) + 1})
	var revs []int64
	for i := range n {
		resp, err := cl.Put(context.Background(), fmt.Sprintf("k%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		w.waitArchived(t, resp.Header.Revision) // one revision per watch response, so per segment
		revs = append(revs, resp.Header.Revision)
	}
	w.kill(t)
	return revs
}

// failingDelete stops a prune at its n-th deletion, as a crash or a lost connection would.
type failingDelete struct {
	Prunable
	n int
}

func (f *failingDelete) Delete(ctx context.Context, name string) error {
	if f.n--; f.n == 0 {
		return errors.New("connection lost")
	}
	return f.Prunable.Delete(ctx, name)
}

// TestPruneKeepsTheChainOfTheRemainingBackups: on a volume and in S3, a prune deletes the segments
// before the oldest remaining backup's revision, oldest first, and the chain still verifies from
// that revision; stopped mid-way it leaves a chain whose start moved forward; repeated it does
// nothing; it never deletes the newest segment, from which a writer then continues the chain; a
// drop deletes the whole chain.
func TestPruneKeepsTheChainOfTheRemainingBackups(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "archive")
	dir := filepath.Join(t.TempDir(), "chain")
	for _, dest := range []Prunable{
		&DirDestination{Dir: dir, Where: "pvc://backups/chain"},
		s3Dest(mio, bucket, "ns/c/archive/x"),
	} {
		t.Run(fmt.Sprintf("%T", dest), func(t *testing.T) {
			revs := chainOfOneRevisionSegments(t, ms[0].ClientURL, dest, 8)
			backupAt := revs[4]

			rep, err := Prune(ctx, &failingDelete{Prunable: dest, n: 3}, backupAt, false)
			if err == nil || rep.Deleted != 2 {
				t.Fatalf("a prune failing at its third deletion: %+v, %v", rep, err)
			}
			if names, _ := dest.List(ctx); len(names) != 6 || names[0] != SegmentName(revs[2], revs[2]) {
				t.Fatalf("after a prune stopped mid-way: %v; want the chain from revision %d", names, revs[2])
			}
			if _, err := Verify(ctx, dest, backupAt, 0); err != nil {
				t.Fatalf("the chain from the backup after a prune stopped mid-way: %v", err)
			}

			rep, err = Prune(ctx, dest, backupAt, false)
			if err != nil || rep.Deleted != 2 || rep.First != backupAt || rep.Last != revs[7] {
				t.Fatalf("prune before %d: %+v, %v; want 2 more deleted, the chain %d..%d", backupAt, rep, err, backupAt, revs[7])
			}
			// The segment holding the backup's own revision stays (its observed time anchors a time target).
			if names, _ := dest.List(ctx); len(names) != 4 || names[0] != SegmentName(backupAt, backupAt) {
				t.Fatalf("after the prune: %v", names)
			}
			verified, err := Verify(ctx, dest, backupAt, 0)
			if err != nil || verified.First != backupAt+1 || verified.Last != revs[7] {
				t.Fatalf("the chain from the backup: %+v, %v", verified, err)
			}
			var ce *ChainError
			if _, err := Verify(ctx, dest, revs[2], 0); !errors.As(err, &ce) || ce.Problem != Gap {
				t.Fatalf("the chain from a deleted backup's revision: %v; want a gap", err)
			}
			if rep, err := Prune(ctx, dest, backupAt, false); err != nil || rep.Deleted != 0 {
				t.Fatalf("the same prune again: %+v, %v; want nothing deleted", rep, err)
			}

			// A bound past the chain's end (the writer behind the newest backup) keeps the newest.
			if rep, err := Prune(ctx, dest, revs[7]+100, false); err != nil || rep.Deleted != 3 || rep.First != revs[7] {
				t.Fatalf("prune past the end: %+v, %v", rep, err)
			}
			// A writer resumes from the kept segment.
			cl := dial(t, ms[0].ClientURL)
			w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, MaxSegmentBytes: 1})
			resp, err := cl.Put(ctx, "after-prune", "v")
			if err != nil {
				t.Fatal(err)
			}
			w.waitArchived(t, resp.Header.Revision)
			w.kill(t)
			if _, err := Verify(ctx, dest, revs[6], resp.Header.Revision); err != nil {
				t.Fatalf("the writer did not continue the pruned chain: %v", err)
			}

			if rep, err := Prune(ctx, dest, 0, true); err != nil || !rep.Dropped || rep.Deleted == 0 || rep.First != 0 {
				t.Fatalf("drop: %+v, %v", rep, err)
			}
			if names, err := dest.List(ctx); err != nil || len(names) != 0 {
				t.Fatalf("after a drop: %v, %v", names, err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the dropped chain's directory: %v; want it gone", err)
			}
		})
	}
}

// TestWorkerArchivePrune: `worker archive prune` reports what it did in its termination log, a
// storage failure as a report with exit 0 (the snapshot's deletion after it in the Job must run),
// and bad arguments with exit 2.
func TestWorkerArchivePrune(t *testing.T) {
	ms := etcdtest.StartCluster(t, 1)
	dir := filepath.Join(t.TempDir(), "chain")
	revs := chainOfOneRevisionSegments(t, ms[0].ClientURL, &DirDestination{Dir: dir}, 3)
	termLog := filepath.Join(t.TempDir(), "termination-log")
	run := func(args ...string) (int, PruneReport) {
		t.Helper()
		var out bytes.Buffer
		code := Main(context.Background(), append([]string{"prune", "--termination-log=" + termLog}, args...), &out)
		var rep PruneReport
		if code == backup.ExitOK {
			b, err := os.ReadFile(termLog)
			if err != nil || json.Unmarshal(b, &rep) != nil || !bytes.Equal(bytes.TrimSpace(out.Bytes()), b) {
				t.Fatalf("report %q in the termination log (%v), %q on stdout", b, err, out.String())
			}
		}
		return code, rep
	}
	code, rep := run("--dir="+dir, "--location=pvc://b/chain", fmt.Sprintf("--before=%d", revs[2]))
	if want := (PruneReport{Chain: "pvc://b/chain", Before: revs[2], Deleted: 2, First: revs[2], Last: revs[2]}); code != backup.ExitOK || rep != want {
		t.Fatalf("prune: exit %d, %+v; want %+v", code, rep, want)
	}

	mio := miniotest.Start(t)
	t.Setenv(backup.EnvAccessKey, mio.AccessKey)
	t.Setenv(backup.EnvSecretKey, mio.SecretKey)
	code, rep = run("--s3-bucket=missing", "--s3-endpoint="+mio.URL, "--s3-path-style", "--s3-prefix=ns/c/archive/x", "--drop")
	if code != backup.ExitOK || rep.Reason != string(reason.BucketNotFound) || rep.Chain != "s3://missing/ns/c/archive/x" || !rep.Dropped {
		t.Fatalf("prune in a missing bucket: exit %d, %+v; want a BucketNotFound report", code, rep)
	}

	for _, args := range [][]string{
		{"--dir=" + dir},                         // neither bound nor drop
		{"--dir=" + dir, "--drop", "--before=5"}, // both
		{"--before=5"},                           // no destination
		{"--dir=" + dir, "--before=-1"},          // a negative bound
	} {
		if code, _ := run(args...); code != backup.ExitPermanent {
			t.Errorf("prune %v: exit %d, want %d", args, code, backup.ExitPermanent)
		}
	}
}
