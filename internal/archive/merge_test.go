package archive

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

func TestChainOf(t *testing.T) {
	n := SegmentName
	for name, tc := range map[string]struct {
		names   []string
		use     []string
		covered map[string][]string
	}{
		"plain chain":               {[]string{n(3, 4), n(1, 2), n(5, 5)}, []string{n(1, 2), n(3, 4), n(5, 5)}, nil},
		"merged with all its parts": {[]string{n(1, 1), n(2, 3), n(1, 3), n(4, 4)}, []string{n(1, 3), n(4, 4)}, map[string][]string{n(1, 3): {n(1, 1), n(2, 3)}}},
		"merged with its last part": {[]string{n(1, 4), n(3, 4), n(5, 6)}, []string{n(1, 4), n(5, 6)}, map[string][]string{n(1, 4): {n(3, 4)}}},
		"merged twice, crashed both times": {[]string{n(1, 2), n(3, 3), n(1, 3), n(4, 4), n(1, 4), n(5, 5)},
			[]string{n(1, 4), n(5, 5)}, map[string][]string{n(1, 4): {n(1, 3), n(1, 2), n(3, 3), n(4, 4)}}},
		"overlap without containment stays for the walk": {[]string{n(1, 3), n(3, 4)}, []string{n(1, 3), n(3, 4)}, nil},
		"other names are left out":                       {[]string{"x.tmp", n(1, 1)}, []string{n(1, 1)}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			use, covered := chainOf(tc.names)
			if !slices.Equal(use, tc.use) || fmt.Sprint(covered) != fmt.Sprint(tc.covered) {
				t.Errorf("chainOf = %v, %v; want %v, %v", use, covered, tc.use, tc.covered)
			}
		})
	}
}

func TestPlanMerge(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	old, young := now.Add(-10*time.Minute), now.Add(-10*time.Second)
	obj := func(first, last, size int64, mod time.Time) backup.Object {
		return backup.Object{Key: SegmentName(first, last), Size: size, Modified: mod}
	}
	p := MergePolicy{Age: time.Minute, MaxBytes: 100}
	for name, tc := range map[string]struct {
		objs   []backup.Object
		groups [][]string
	}{
		"old small segments merge, the newest stays": {
			[]backup.Object{obj(1, 1, 10, old), obj(2, 2, 10, old), obj(3, 3, 10, old)},
			[][]string{{SegmentName(1, 1), SegmentName(2, 2)}}},
		"young segments wait": {
			[]backup.Object{obj(1, 1, 10, old), obj(2, 2, 10, old), obj(3, 3, 10, young), obj(4, 4, 10, old), obj(5, 5, 10, old), obj(6, 6, 1, young)},
			[][]string{{SegmentName(1, 1), SegmentName(2, 2)}}},
		"a group ends before MaxBytes": {
			[]backup.Object{obj(1, 1, 40, old), obj(2, 2, 40, old), obj(3, 3, 40, old), obj(4, 4, 40, old), obj(5, 5, 40, old)},
			[][]string{{SegmentName(1, 1), SegmentName(2, 2)}, {SegmentName(3, 3), SegmentName(4, 4)}}},
		"a large segment is left as it is and splits runs": {
			[]backup.Object{obj(1, 1, 10, old), obj(2, 2, 10, old), obj(3, 9, 60, old), obj(10, 10, 10, old), obj(11, 11, 10, old), obj(12, 12, 10, old)},
			[][]string{{SegmentName(1, 1), SegmentName(2, 2)}, {SegmentName(10, 10), SegmentName(11, 11)}}},
		"a gap splits runs; a run of one is no group": {
			[]backup.Object{obj(1, 1, 10, old), obj(5, 5, 10, old), obj(6, 6, 10, old), obj(7, 7, 10, old)},
			[][]string{{SegmentName(5, 5), SegmentName(6, 6)}}},
		"a small merged segment merges again with what follows": {
			[]backup.Object{obj(1, 4, 20, old), obj(5, 5, 10, old), obj(6, 6, 10, old)},
			[][]string{{SegmentName(1, 4), SegmentName(5, 5)}}},
		"covered parts are not merged again": {
			[]backup.Object{obj(1, 1, 10, old), obj(2, 2, 10, old), obj(1, 2, 20, old), obj(3, 3, 10, old)},
			nil},
		"empty": {nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			got := PlanMerge(tc.objs, now, p)
			if fmt.Sprint(got.Groups) != fmt.Sprint(tc.groups) {
				t.Errorf("groups %v, want %v", got.Groups, tc.groups)
			}
		})
	}
}

// mergeCrashing runs Merge with the failpoint after the merged segment's write armed, as a worker
// killed there: it must crash there, with nothing deleted.
func mergeCrashing(t *testing.T, dest Mergeable, p MergePolicy) {
	t.Helper()
	disarm := failpoint.ArmPanicking(failpoint.AfterSegmentsMerged)
	defer disarm()
	defer func() {
		if c, ok := recover().(failpoint.Crash); !ok || c.Name != failpoint.AfterSegmentsMerged {
			t.Fatalf("merge did not crash at %s (%v)", failpoint.AfterSegmentsMerged, c)
		}
	}()
	rep, err := Merge(context.Background(), dest, p, time.Now())
	t.Fatalf("merge returned %+v, %v", rep, err)
}

func listed(t *testing.T, dest Destination) []string {
	t.Helper()
	names, err := dest.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sortNames(names)
	return names
}

// verifyAll checks the chain verifies from after to last, each revision once.
func verifyAll(t *testing.T, dest Destination, after, last int64) {
	t.Helper()
	rep, err := Verify(context.Background(), dest, after, 0)
	if err != nil {
		t.Fatalf("verify: %v (segments %v)", err, listed(t, dest))
	}
	if rep.Last != last || rep.Revisions != last-after {
		t.Fatalf("verified %+v; want every revision after %d to %d once", rep, after, last)
	}
}

// TestMergeSurvivesACrashAndRestoresInsideAMergedSegment: in MinIO, a chain of one-revision
// segments around a full snapshot is merged. A merge killed after storing the merged segment leaves
// it beside all its parts; the verifier and a restore to a revision inside it use one consistent
// set (each revision once), as they do with some parts deleted; the next merge deletes the rest. A
// writer then continues the chain after the merged segment, and a merge of merged and new segments
// still verifies and restores.
func TestMergeSurvivesACrashAndRestoresInsideAMergedSegment(t *testing.T) {
	ctx := context.Background()
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "pitr")
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	dest := s3Dest(mio, bucket, "prod/chain/")
	from := head(t, cl) + 1
	w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, FlushInterval: 50 * time.Millisecond, MaxSegmentBytes: 1, StartRevision: from})
	snap, final := snapshotAmidArchive(t, cl, w, ms[0].ClientURL, &backup.S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket,
		Key: "prod/full.db", PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey})
	parts := listed(t, dest)
	if len(parts) != int(final-from+1) {
		t.Fatalf("%d segments for revisions %d..%d", len(parts), from, final)
	}
	t.Setenv(backup.EnvAccessKey, mio.AccessKey)
	t.Setenv(backup.EnvSecretKey, mio.SecretKey)
	s3 := []string{"--s3-endpoint=" + mio.URL, "--s3-bucket=" + bucket, "--s3-path-style", "--s3-key=prod/full.db", "--archive-prefix=prod/chain/"}
	restoreTo := func(t *testing.T, target, latest int64) {
		t.Helper()
		workerRestore(t, snap, append(s3, fmt.Sprintf("--target-revision=%d", target))...).restored(t, cl, snap.Revision, target, latest)
	}

	p := MergePolicy{MaxBytes: 1 << 20}
	mergeCrashing(t, dest, p)
	merged := SegmentName(from, final-1)
	if got := listed(t, dest); len(got) != len(parts)+1 || !slices.Contains(got, merged) {
		t.Fatalf("after the crash: %v; want %s beside all %d parts", got, merged, len(parts))
	}
	t.Run("merged segment beside all its parts", func(t *testing.T) {
		verifyAll(t, dest, snap.Revision, final)
		restoreTo(t, snap.Revision+5, final)
	})
	t.Run("merged segment beside some of its parts", func(t *testing.T) {
		for _, n := range parts[:4] {
			if err := dest.Delete(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		verifyAll(t, dest, from-1, final)
		restoreTo(t, snap.Revision+3, final)
	})
	rep, err := Merge(ctx, dest, p, time.Now())
	if err != nil || rep != (MergeReport{Cleaned: len(parts) - 1 - 4}) {
		t.Fatalf("merge after the crash: %+v, %v; want the %d parts left deleted", rep, err, len(parts)-1-4)
	}
	if got := listed(t, dest); !slices.Equal(got, []string{merged, parts[len(parts)-1]}) {
		t.Fatalf("after the merge: %v; want %s and the newest segment", got, merged)
	}
	verifyAll(t, dest, from-1, final)
	restoreTo(t, snap.Revision+6, final)

	// The writer resumes from the newest segment, after the merged one, and links on.
	w = startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, FlushInterval: 50 * time.Millisecond, MaxSegmentBytes: 1})
	// A key on a lease: the merged segment carries the lease's TTL for the replay to grant it.
	lease, err := cl.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cl.Put(ctx, "leased", "v", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	w.waitArchived(t, put.Header.Revision)
	writeRevisions(t, cl, w, 6)
	final2 := head(t, cl)
	w.waitArchived(t, final2)
	w.kill(t)
	verifyAll(t, dest, from-1, final2)
	rep, err = Merge(ctx, dest, p, time.Now())
	if err != nil || rep.Merged != 1 || rep.Replaced != 1+1+1+5 {
		t.Fatalf("second merge: %+v, %v; want the merged segment, the old newest and 6 new ones in one", rep, err)
	}
	if got := listed(t, dest); !slices.Equal(got, []string{SegmentName(from, final2-1), SegmentName(final2, final2)}) {
		t.Fatalf("after the second merge: %v", got)
	}
	verifyAll(t, dest, from-1, final2)
	restoreTo(t, final2-1, final2)
}

// TestVerifyOnMergedChainsOnAVolume: on a volume, a merged segment's link to the segment after it
// is checked (a wrong EndSHA256 is a Mismatch) and a merge deletes the parts it replaced.
func TestVerifyOnMergedChainsOnAVolume(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	dir := filepath.Join(t.TempDir(), "chain")
	dest := &DirDestination{Dir: dir, Where: "pvc://backups/chain"}
	revs := chainOfOneRevisionSegments(t, ms[0].ClientURL, dest, 8)
	first, last := revs[0], revs[len(revs)-1]
	rep, err := Merge(ctx, dest, MergePolicy{MaxBytes: 1 << 20}, time.Now())
	if err != nil || rep.Merged != 1 || rep.Replaced != 7 {
		t.Fatalf("merge: %+v, %v", rep, err)
	}
	verifyAll(t, dest, first-1, last)
	merged := SegmentName(first, last-1)

	// A merged segment claiming another end link.
	seg, err := readSegment(ctx, dest, merged)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(name string, h Header, recs []Record) {
		t.Helper()
		var b builder
		for _, r := range recs {
			if err := b.add(r, func(int64) int64 { return 0 }); err != nil {
				t.Fatal(err)
			}
		}
		b.header.EndSHA256 = h.EndSHA256
		var id uint64
		if _, err := fmt.Sscanf(h.ClusterID, "%x", &id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := store(ctx, dest, &b, id, h.PrevSHA256); err != nil {
			t.Fatal(err)
		}
		if name != SegmentName(recs[0].Revision, recs[len(recs)-1].Revision) {
			t.Fatalf("rewrote %s under another name", name)
		}
	}
	bad := seg.Header
	bad.EndSHA256 = seg.SHA256
	rewrite(merged, bad, seg.Records)
	var ce *ChainError
	if _, err := Verify(ctx, dest, first-1, 0); !errors.As(err, &ce) || ce.Problem != Mismatch || ce.Segment != dest.Location(SegmentName(last, last)) {
		t.Fatalf("verify with a wrong end link: %v; want a Mismatch at the newest segment", err)
	}
	rewrite(merged, seg.Header, seg.Records)
	verifyAll(t, dest, first-1, last)

}

// TestWriterMergesOldSegmentsAsItRuns: a writer with a merge age merges its older segments while it
// archives, and the chain it leaves verifies whole.
func TestWriterMergesOldSegmentsAsItRuns(t *testing.T) {
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	dest := &DirDestination{Dir: filepath.Join(t.TempDir(), "chain"), Where: "pvc://backups/chain"}
	from := head(t, cl) + 1
	w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, FlushInterval: 20 * time.Millisecond,
		MaxSegmentBytes: 64 << 10, MergeAge: 2 * time.Second, StartRevision: from})
	var written int
	deadline := time.Now().Add(30 * time.Second)
	for {
		writeRevisions(t, cl, w, 4)
		written += 4
		if n := len(listed(t, dest)); written >= 100 && n < written/4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d segments for %d revisions after 30 s: not merged", len(listed(t, dest)), written)
		}
	}
	final := head(t, cl)
	w.waitArchived(t, final)
	w.kill(t)
	verifyAll(t, dest, from-1, final)
}
