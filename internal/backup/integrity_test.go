package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// integrityFixture is one snapshot of a real cluster in real MinIO, with its manifest, and helpers
// to change what is stored.
type integrityFixture struct {
	t      *testing.T
	mio    *miniotest.Server
	bucket string
	sink   *S3
	res    Result
	// eps are the source cluster's client URLs, for more snapshots.
	eps []string
}

func newIntegrityFixture(t *testing.T) *integrityFixture {
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "integrity")
	ms := etcdtest.StartCluster(t, 1)
	cl := putKeys(t, etcdtest.ClientURLs(ms), 200)
	// A compaction and later writes: the manifest's hash must survive a compacted history.
	if _, err := cl.Compact(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	putKeys(t, etcdtest.ClientURLs(ms), 20)
	sink := &S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: "prod/b1.db", PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}
	res, err := Take(context.Background(), etcdtest.ClientURLs(ms), nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	return &integrityFixture{t: t, mio: mio, bucket: bucket, sink: sink, res: res, eps: etcdtest.ClientURLs(ms)}
}

func (f *integrityFixture) get(key string) []byte {
	f.t.Helper()
	obj, err := f.mio.Client(f.t).GetObject(context.Background(), f.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := io.ReadAll(obj)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *integrityFixture) put(key string, b []byte) {
	f.t.Helper()
	if _, err := f.mio.Client(f.t).PutObject(context.Background(), f.bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *integrityFixture) verify() (Result, error) {
	f.t.Helper()
	dir := f.t.TempDir()
	return Verify(context.Background(), f.sink, Expect{SHA256: f.res.SHA256, Size: f.res.Size},
		VerifyConfig{Etcd: filepath.Join(filepath.Dir(etcdutl(f.t)), "etcd"), Etcdutl: etcdutl(f.t), WorkDir: filepath.Join(dir, "w"), Revision: f.res.Revision})
}

// TestTheManifestBesideASnapshotIsWhatWasStored: the backup Job writes, beside the snapshot, a
// manifest with the stored bytes' SHA-256 and size, the revision, and the source member's keyspace
// hash; an untouched snapshot then passes the test-restore with its keyspace hash compared.
func TestTheManifestBesideASnapshotIsWhatWasStored(t *testing.T) {
	f := newIntegrityFixture(t)
	var m Manifest
	if err := json.Unmarshal(f.get("prod/b1.db"+ManifestSuffix), &m); err != nil {
		t.Fatal(err)
	}
	if m.SHA256 != f.res.SHA256 || m.Size != f.res.Size || m.Revision != f.res.Revision || m.Format != ManifestFormat {
		t.Fatalf("manifest %+v, result %+v", m, f.res)
	}
	if m.Keyspace == nil || m.Keyspace.Revision != f.res.Revision || m.Keyspace.CompactRevision != 100 || *m.Keyspace != *f.res.Keyspace {
		t.Fatalf("manifest keyspace %+v, result %+v: want the hash at the snapshot's revision after the compaction at 100", m.Keyspace, f.res.Keyspace)
	}
	if f.res.Manifest != "s3://"+f.bucket+"/prod/b1.db"+ManifestSuffix {
		t.Errorf("manifest location %q", f.res.Manifest)
	}
	got, err := f.verify()
	if err != nil {
		t.Fatalf("an untouched snapshot: %v", err)
	}
	if !got.KeyspaceVerified || got.SHA256 != f.res.SHA256 {
		t.Fatalf("an untouched snapshot verified as %+v: want its keyspace hash compared", got)
	}
}

// TestOneFlippedByteIsReportedCorrupt: one byte changed in the stored snapshot fails the
// test-restore before etcd sees it, permanently and with the reason the operator marks corrupt on.
func TestOneFlippedByteIsReportedCorrupt(t *testing.T) {
	f := newIntegrityFixture(t)
	b := f.get("prod/b1.db")
	b[len(b)/2] ^= 0x01
	f.put("prod/b1.db", b)
	_, err := f.verify()
	if fl := reasonOf(t, err); fl.Reason != reason.SnapshotChecksumMismatch || !fl.Permanent {
		t.Fatalf("a flipped byte: %v (permanent %t)", err, fl.Permanent)
	}
	// A restore without a record (a raw object) checks the bytes against the manifest instead.
	t.Setenv(EnvAccessKey, f.mio.AccessKey)
	t.Setenv(EnvSecretKey, f.mio.SecretKey)
	dir := t.TempDir()
	var out bytes.Buffer
	code := RestoreMain(context.Background(), []string{"--etcdutl=" + etcdutl(t), "--termination-log=" + filepath.Join(dir, "term"),
		"--snapshot=" + filepath.Join(dir, "s.db"), "--data-dir=" + filepath.Join(dir, "data"), "--name=a",
		"--initial-cluster=a=http://a:2380", "--initial-cluster-token=t", "--initial-advertise-peer-urls=http://a:2380",
		"--s3-endpoint=" + f.mio.URL, "--s3-bucket=" + f.bucket, "--s3-key=prod/b1.db", "--s3-path-style"}, &out, nil)
	rep, _ := ParseReport(lastLines(out.String(), 1))
	if code != ExitPermanent || rep.Reason != reason.SnapshotChecksumMismatch || Restored(filepath.Join(dir, "data")) {
		t.Fatalf("restore of a flipped raw object: exit %d, report %+v", code, rep)
	}
}

// TestAChangedManifestIsRefused: a manifest that no longer agrees with the record, or whose
// keyspace hash is not the snapshot's, fails the test-restore; a snapshot without a manifest (taken
// before manifests existed) is verified by its record alone, never called corrupt.
func TestAChangedManifestIsRefused(t *testing.T) {
	f := newIntegrityFixture(t)
	key := "prod/b1.db" + ManifestSuffix
	orig := f.get(key)
	var m Manifest
	if err := json.Unmarshal(orig, &m); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(m *Manifest)
		want   reason.Reason
	}{
		{"another SHA-256", func(m *Manifest) { m.SHA256 = fmt.Sprintf("%064d", 0) }, reason.ManifestMismatch},
		{"another size", func(m *Manifest) { m.Size++ }, reason.ManifestMismatch},
		{"another keyspace hash", func(m *Manifest) { m.Keyspace.Hash++ }, reason.KeyspaceHashMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := m
			ks := *m.Keyspace
			changed.Keyspace = &ks
			tc.change(&changed)
			b, _ := json.Marshal(changed)
			f.put(key, b)
			_, err := f.verify()
			if fl := reasonOf(t, err); fl.Reason != tc.want || !fl.Permanent {
				t.Fatalf("got %v (permanent %t), want %s", err, fl.Permanent, tc.want)
			}
		})
	}
	f.put(key, []byte("not json"))
	if _, err := f.verify(); reasonOf(t, err).Reason != reason.ManifestMismatch {
		t.Fatalf("an unreadable manifest: %v", err)
	}
	if err := f.mio.Client(t).RemoveObject(context.Background(), f.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := f.verify()
	if err != nil || got.KeyspaceVerified {
		t.Fatalf("a snapshot without a manifest: %+v, %v; want verified by its record, keyspace not compared", got, err)
	}
}

// TestDeleteTakesTheManifestWithTheSnapshot: retention leaves no manifest vouching for a snapshot
// that is gone.
func TestDeleteTakesTheManifestWithTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	ms := etcdtest.StartCluster(t, 1)
	putKeys(t, etcdtest.ClientURLs(ms), 5)
	snap := filepath.Join(dir, "b.db")
	if _, err := Take(context.Background(), etcdtest.ClientURLs(ms), nil, &File{Path: snap, Location: "pvc://c/b.db"}); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadManifest(context.Background(), &File{Path: snap}); err != nil || m == nil {
		t.Fatalf("manifest on the volume: %+v, %v", m, err)
	}
	var out bytes.Buffer
	if code := DeleteMain(context.Background(), []string{"--file=" + snap, "--termination-log="}, &out); code != ExitOK {
		t.Fatalf("delete: exit %d: %s", code, out.String())
	}
	if m, err := ReadManifest(context.Background(), &File{Path: snap}); err != nil || m != nil {
		t.Fatalf("manifest after the delete: %+v, %v", m, err)
	}
}

func TestCorruptVerdict(t *testing.T) {
	for why, want := range map[reason.Reason]bool{
		reason.SnapshotChecksumMismatch: true, reason.ManifestMismatch: true, reason.KeyspaceHashMismatch: true, reason.SnapshotCorrupt: true,
		reason.DownloadFailed: false, reason.SnapshotNotFound: false, reason.VerifyFailed: false, reason.JobFailed: false, reason.AccessDenied: false,
	} {
		if got := CorruptVerdict(why); got != want {
			t.Errorf("%s: corrupt %t, want %t", why, got, want)
		}
	}
}

// TestATestRestoreRechecksTheOtherBackups: the test-restore of the newest backup also holds the
// schedule's other backups to their records: one whose stored bytes changed after its own
// test-restore is reported corrupt (whatever the newest's outcome); an untouched one, and one that
// cannot be read at all (gone: that says nothing of its bytes), are not.
func TestATestRestoreRechecksTheOtherBackups(t *testing.T) {
	f := newIntegrityFixture(t)
	newest := &S3{Endpoint: f.mio.URL, Region: "us-east-1", Bucket: f.bucket, Key: "prod/b2.db", PathStyle: true, AccessKey: f.mio.AccessKey, SecretKey: f.mio.SecretKey}
	res2, err := Take(context.Background(), f.eps, nil, newest)
	if err != nil {
		t.Fatal(err)
	}
	untouched := Recheck{Backup: "b2-again", Expect: Expect{SHA256: res2.SHA256, Size: res2.Size}, Key: "prod/b2.db"}
	flipped := Recheck{Backup: "b1", Expect: Expect{SHA256: f.res.SHA256, Size: f.res.Size}, Key: "prod/b1.db"}
	gone := Recheck{Backup: "b0", Expect: Expect{SHA256: f.res.SHA256, Size: f.res.Size}, Key: "prod/b0.db"}
	b := f.get("prod/b1.db")
	b[len(b)/3] ^= 0x80
	f.put("prod/b1.db", b)

	t.Setenv(EnvAccessKey, f.mio.AccessKey)
	t.Setenv(EnvSecretKey, f.mio.SecretKey)
	dir := t.TempDir()
	var out bytes.Buffer
	args := []string{"--etcdutl=" + etcdutl(t), "--etcd=" + filepath.Join(filepath.Dir(etcdutl(t)), "etcd"), "--termination-log=" + filepath.Join(dir, "term"),
		"--work-dir=" + filepath.Join(dir, "w"), "--sha256=" + res2.SHA256, fmt.Sprintf("--size=%d", res2.Size), fmt.Sprintf("--revision=%d", res2.Revision),
		"--s3-endpoint=" + f.mio.URL, "--s3-bucket=" + f.bucket, "--s3-key=prod/b2.db", "--s3-path-style",
		"--recheck=" + untouched.String(), "--recheck=" + flipped.String(), "--recheck=" + gone.String()}
	code := VerifyMain(context.Background(), args, &out, nil)
	rep, ok := ParseReport(lastLines(out.String(), 1))
	if code != ExitOK || !ok || rep.Result == nil {
		t.Fatalf("the newest backup's test-restore: exit %d, report %+v (%s)", code, rep, out.String())
	}
	if len(rep.Corrupt) != 1 || rep.Corrupt[0].Backup != "b1" || rep.Corrupt[0].Reason != string(reason.SnapshotChecksumMismatch) {
		t.Fatalf("rechecked: %+v, want b1 alone, SnapshotChecksumMismatch", rep.Corrupt)
	}
	if r, err := ParseRecheck(flipped.String()); err != nil || r != flipped {
		t.Fatalf("the flag's form does not read back: %+v %v", r, err)
	}
}
