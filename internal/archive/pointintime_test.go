package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// restoreRun is one `worker restore` into a fresh data volume, as a member's init container runs it.
type restoreRun struct {
	code    int
	report  backup.Report
	stdout  string
	dataDir string
	member  *etcdtest.Member
}

// workerRestore runs `worker restore` with the point-in-time hook cmd/worker hands in: the
// member's flags, then args (where the snapshot and the archive are, the target). Before a
// point-in-time one, the volume holds what a replay killed mid-way leaves: a scratch member and a
// partial output, which a restore that trusted them would serve. Once it ran, no scratch is left.
func workerRestore(t *testing.T, snap backup.Result, args ...string) restoreRun {
	t.Helper()
	vol := t.TempDir()
	snapshot := filepath.Join(vol, "restore-snapshot.db")
	workDir, output := filepath.Join(vol, "restore-snapshot-replay"), filepath.Join(vol, "restore-snapshot-replayed.db")
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--archive-") }) {
		if err := os.MkdirAll(filepath.Join(workDir, "replay", "member", "snap"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(output, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := etcdtest.NewMemberURLs(t, "m0")
	term := filepath.Join(vol, "termination-log")
	all := append([]string{"--etcdutl=" + binaryPath(t, "etcdutl"), "--termination-log=" + term,
		"--snapshot=" + snapshot, "--data-dir=" + filepath.Join(vol, "data"), "--name=" + m.Name,
		"--initial-cluster=" + m.Name + "=" + m.PeerURL, "--initial-cluster-token=restored", "--initial-advertise-peer-urls=" + m.PeerURL,
		"--sha256=" + snap.SHA256, fmt.Sprintf("--size=%d", snap.Size)}, args...)
	var out bytes.Buffer
	r := restoreRun{code: backup.RestoreMain(context.Background(), all, &out, &PointInTime{}), stdout: out.String(),
		dataDir: filepath.Join(vol, "data"), member: m}
	if b, err := os.ReadFile(term); err == nil {
		r.report, _ = backup.ParseReport(string(b))
	}
	if strings.Contains(r.report.Message, "bad arguments") {
		return r // refused before touching the volume
	}
	for _, scratch := range []string{snapshot, workDir, output} {
		if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left on the volume (%v)", scratch, err)
		}
	}
	return r
}

// failed checks a run failed permanently with why, saying want, and restored nothing.
func (r restoreRun) failed(t *testing.T, why reason.Reason, want string) {
	t.Helper()
	if r.code != backup.ExitPermanent || r.report.Reason != why || !strings.Contains(r.report.Message, want) {
		t.Errorf("exit %d, report %+v; want a permanent %s saying %q\n%s", r.code, r.report, why, want, r.stdout)
	}
	if backup.Restored(r.dataDir) {
		t.Errorf("%s holds a member after a failed restore", r.dataDir)
	}
}

// restored checks a point-in-time restore of the source cl to revision want out of an archive
// ending at latest: the report, and the data directory served: the source's keyspace at want,
// every field, at revision want + bump, with reads at the old cluster's revisions compacted.
func (r restoreRun) restored(t *testing.T, cl *clientv3.Client, snap, want, latest int64) {
	t.Helper()
	if r.code != backup.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stdout)
	}
	p, bump := r.report.PointInTime, BumpFor(latest, want)
	if p == nil || p.SnapshotRevision != snap || p.Revision != want || p.Applied != want-snap || p.Latest != latest || p.Bump != bump {
		t.Fatalf("report %+v; want the snapshot at %d replayed to %d (latest %d), bumped by %d", p, snap, want, latest, bump)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("at revision %d", want)) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("stdout %q: want one line naming revision %d", r.stdout, want)
	}
	restored := etcdtest.ServeRestored(t, r.member, r.dataDir)
	if err := sameKeyspace(keyspace(t, restored, 0), keyspace(t, cl, want)); err != nil {
		t.Fatalf("revision %d: %v", want, err)
	}
	if h := head(t, restored); h != want+bump {
		t.Fatalf("restored revision %d, want %d + bump %d", h, want, bump)
	}
	if _, err := restored.Get(context.Background(), "k", clientv3.WithRev(latest)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("read at the old cluster's revision %d: %v, want compacted", latest, err)
	}
}

// writeRevisions makes n revisions on cl (puts, deletes, a transaction), each archived by w
// before the next (with MaxSegmentBytes 1, each its own segment).
func writeRevisions(t *testing.T, cl *clientv3.Client, w *running, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		var rev int64
		var err error
		switch i % 4 {
		case 3:
			var resp *clientv3.DeleteResponse
			resp, err = cl.Delete(ctx, fmt.Sprintf("k%d", i-2))
			if err == nil {
				rev = resp.Header.Revision
			}
		case 2:
			var resp *clientv3.TxnResponse
			resp, err = cl.Txn(ctx).Then(clientv3.OpPut("a", fmt.Sprint(i)), clientv3.OpPut("b", fmt.Sprint(i)), clientv3.OpDelete("k0")).Commit()
			if err == nil {
				rev = resp.Header.Revision
			}
		default:
			var resp *clientv3.PutResponse
			resp, err = cl.Put(ctx, fmt.Sprintf("k%d", i), fmt.Sprint(i))
			if err == nil {
				rev = resp.Header.Revision
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		w.waitArchived(t, rev)
	}
}

// TestWorkerRestoreToARevisionFromS3: `worker restore` with --archive-prefix fetches the full
// snapshot from S3, replays the chain under the prefix in the same bucket to --target-revision,
// and restores that with a bumped, compacted revision; scratch files are gone, the termination
// log has the result, and a second run (a restarted container) finds the member and stops.
func TestWorkerRestoreToARevisionFromS3(t *testing.T) {
	ctx := context.Background()
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "pitr")
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	for i := range 5 {
		if _, err := cl.Put(ctx, fmt.Sprintf("seed%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: s3Dest(mio, bucket, "prod/chain/"),
		FlushInterval: 50 * time.Millisecond, MaxSegmentBytes: 1, StartRevision: head(t, cl) + 1})
	snap, final := snapshotAmidArchive(t, cl, w, ms[0].ClientURL, &backup.S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket,
		Key: "prod/full.db", PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey})

	t.Setenv(backup.EnvAccessKey, mio.AccessKey)
	t.Setenv(backup.EnvSecretKey, mio.SecretKey)
	s3 := []string{"--s3-endpoint=" + mio.URL, "--s3-bucket=" + bucket, "--s3-path-style", "--s3-key=prod/full.db", "--archive-prefix=prod/chain/"}
	target := snap.Revision + 5
	r := workerRestore(t, snap, append(s3, fmt.Sprintf("--target-revision=%d", target))...)
	if r.code == backup.ExitOK {
		var again bytes.Buffer
		args := []string{"--data-dir=" + r.dataDir, "--snapshot=" + filepath.Join(filepath.Dir(r.dataDir), "restore-snapshot.db"), "--name=m0",
			fmt.Sprintf("--target-revision=%d", target)}
		if code := backup.RestoreMain(ctx, append(args, s3...), &again, &PointInTime{}); code != backup.ExitOK || !strings.Contains(again.String(), "nothing to restore") {
			t.Errorf("second run: exit %d, %q; want nothing to restore", code, again.String())
		}
	}
	r.restored(t, cl, snap.Revision, target, final)
}

// snapshotAmidArchive writes 3 revisions under writer w, takes a full snapshot of the member at
// endpoint into sink, writes 8 more, and stops w once it archived them all: a chain that runs across
// the snapshot. It returns the snapshot and the last revision.
func snapshotAmidArchive(t *testing.T, cl *clientv3.Client, w *running, endpoint string, sink backup.Sink) (backup.Result, int64) {
	t.Helper()
	writeRevisions(t, cl, w, 3)
	snap, err := backup.Take(context.Background(), []string{endpoint}, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	writeRevisions(t, cl, w, 8)
	final := head(t, cl)
	w.waitArchived(t, final)
	w.kill(t)
	return snap, final
}

// TestWorkerRestoreFromAVolume: the snapshot and the chain on a mounted volume (--file,
// --archive-dir). A target time restores the revisions observed at or before it; without archive
// flags the restore is the plain one; targets out of reach, contradicting flags and a chain with
// a segment missing fail permanently with their reason, restoring nothing.
func TestWorkerRestoreFromAVolume(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	backups := t.TempDir()
	chain := filepath.Join(backups, "chain")
	dest := &DirDestination{Dir: chain, Where: "pvc://backups/chain"}
	from := head(t, cl) + 1
	w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, FlushInterval: 50 * time.Millisecond, MaxSegmentBytes: 1, StartRevision: from})
	snap, final := snapshotAmidArchive(t, cl, w, ms[0].ClientURL, &backup.File{Path: filepath.Join(backups, "full.db"), Location: "pvc://backups/full.db"})
	times := map[int64]time.Time{}
	if _, err := walk(ctx, dest, from-1, 0, func(_ Header, r Record) (bool, error) { times[r.Revision] = r.Time; return true, nil }); err != nil {
		t.Fatal(err)
	}
	vol := []string{"--file=" + filepath.Join(backups, "full.db"), "--location=pvc://backups/full.db"}
	archive := slices.Concat(vol, []string{"--archive-dir=" + chain, "--archive-location=pvc://backups/chain"})

	t.Run("target time", func(t *testing.T) {
		at := times[snap.Revision+4]
		want := snap.Revision
		for rev, tm := range times {
			if !tm.After(at) && rev > want {
				want = rev
			}
		}
		r := workerRestore(t, snap, append(archive, "--target-time="+at.Format(time.RFC3339Nano))...)
		r.restored(t, cl, snap.Revision, want, final)
		if !r.report.PointInTime.Time.Equal(times[want]) {
			t.Errorf("reported time %v, want revision %d's %v", r.report.PointInTime.Time, want, times[want])
		}
	})
	t.Run("no archive flags: a plain restore", func(t *testing.T) {
		r := workerRestore(t, snap, vol...)
		if r.code != backup.ExitOK || r.report.PointInTime != nil {
			t.Fatalf("exit %d, report %+v: %s", r.code, r.report, r.stdout)
		}
		restored := etcdtest.ServeRestored(t, r.member, r.dataDir)
		if h := head(t, restored); h != snap.Revision {
			t.Fatalf("restored revision %d, want the snapshot's %d, not bumped", h, snap.Revision)
		}
		if err := sameKeyspace(keyspace(t, restored, 0), keyspace(t, cl, snap.Revision)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("target time before the snapshot", func(t *testing.T) {
		workerRestore(t, snap, append(archive, "--target-time="+times[from].Format(time.RFC3339Nano))...).
			failed(t, reason.PointInTimeUnreachable, "the newest full snapshot at or before the target is needed")
	})
	t.Run("target revision before the snapshot", func(t *testing.T) {
		workerRestore(t, snap, append(archive, fmt.Sprintf("--target-revision=%d", snap.Revision-1))...).
			failed(t, reason.PointInTimeUnreachable, fmt.Sprintf("the target revision %d is before the full snapshot's revision %d", snap.Revision-1, snap.Revision))
	})
	t.Run("target revision beyond the archive", func(t *testing.T) {
		workerRestore(t, snap, append(archive, fmt.Sprintf("--target-revision=%d", final+5))...).
			failed(t, reason.PointInTimeUnreachable, "beyond the archive's last revision")
	})
	t.Run("both targets", func(t *testing.T) {
		workerRestore(t, snap, append(archive, "--target-revision=5", "--target-time="+times[from].Format(time.RFC3339))...).
			failed(t, reason.RestoreFailed, "exclude each other")
	})
	t.Run("a target without an archive", func(t *testing.T) {
		workerRestore(t, snap, append(vol, "--target-revision=5")...).failed(t, reason.RestoreFailed, "need --archive-prefix or --archive-dir")
	})
	t.Run("a segment missing", func(t *testing.T) {
		missing := SegmentName(snap.Revision+3, snap.Revision+3)
		if err := os.Remove(filepath.Join(chain, missing)); err != nil {
			t.Fatal(err)
		}
		workerRestore(t, snap, archive...).failed(t, reason.ArchiveChainBroken, "Gap at pvc://backups/chain/"+SegmentName(snap.Revision+4, snap.Revision+4))
	})
}

// A replay's errors reach the operator with the reason and permanence it acts on: S3's transient
// errors are retried, the same snapshot and chain failing the same way are not.
func TestReplayFailuresKeepTheirReasons(t *testing.T) {
	for _, tc := range []struct {
		err       error
		why       reason.Reason
		permanent bool
	}{
		{fmt.Errorf("list the archive: %w", &backup.Failure{Reason: reason.DownloadFailed, Err: errors.New("connection refused")}), reason.DownloadFailed, false},
		{fmt.Errorf("read segment: %w", &backup.Failure{Reason: reason.AccessDenied, Permanent: true, Err: errors.New("denied")}), reason.AccessDenied, true},
		{&ChainError{Problem: Gap, Segment: "s3://b/chain/x.seg", Detail: "revisions 5 to 6 are missing"}, reason.ArchiveChainBroken, true},
		{&ChainError{Problem: Mismatch, Detail: "revision 5 replayed as 6"}, reason.ArchiveChainBroken, true},
		{&ChainError{Problem: Short, Detail: "the chain ends at revision 9; the target is 12"}, reason.PointInTimeUnreachable, true},
		{&BeforeSnapshotError{SnapshotRevision: 10, TargetRevision: 4}, reason.PointInTimeUnreachable, true},
		{context.Canceled, reason.RestoreFailed, false},
	} {
		f := backup.AsFailure(restoreFailure(tc.err), reason.RestoreFailed)
		if f.Reason != tc.why || f.Permanent != tc.permanent || !strings.Contains(f.Err.Error(), tc.err.Error()) {
			t.Errorf("%v: %s (permanent %v): %v; want %s (permanent %v)", tc.err, f.Reason, f.Permanent, f.Err, tc.why, tc.permanent)
		}
	}
}
