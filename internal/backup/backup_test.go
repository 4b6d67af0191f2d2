package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

func putKeys(t *testing.T, endpoints []string, n int) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	for i := 0; i < n; i++ {
		if _, err := cl.Put(context.Background(), fmt.Sprintf("k%05d", i), fmt.Sprintf("v%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

func reasonOf(t *testing.T, err error) *Failure {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("want a *Failure, got %T: %v", err, err)
	}
	return f
}

func TestTakeToS3ThenFetchAndRestore(t *testing.T) {
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "backups")
	ms := etcdtest.StartCluster(t, 3)
	cl := putKeys(t, etcdtest.ClientURLs(ms), 500)
	ctx := context.Background()

	sink := &S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: ObjectKey("/team/", "b1.db"), PathStyle: true,
		AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}
	res, err := Take(ctx, etcdtest.ClientURLs(ms), nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.Location != "s3://"+bucket+"/team/b1.db" {
		t.Errorf("location = %s", res.Location)
	}
	st, err := cl.Status(ctx, ms[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if res.Member == fmt.Sprintf("%x", st.Leader) {
		t.Errorf("snapshot taken from the leader %s although followers were healthy", res.Member)
	}
	if res.Revision < 501 || res.EtcdVersion == "" || res.Size == 0 {
		t.Errorf("result %+v: want revision ≥ 501, a version and a size", res)
	}
	// What is stored is exactly what was hashed.
	obj, err := mio.Client(t).GetObject(ctx, bucket, "team/b1.db", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(stored)
	if int64(len(stored)) != res.Size || hex.EncodeToString(sum[:]) != res.SHA256 {
		t.Fatalf("stored %d bytes sha256 %x; result says %d %s", len(stored), sum, res.Size, res.SHA256)
	}

	dir := t.TempDir()
	snap := filepath.Join(dir, "snapshot.db")
	if err := Fetch(ctx, sink, snap, Expect{SHA256: strings.Repeat("0", 64), Size: res.Size}); reasonOf(t, err).Reason != reason.SnapshotChecksumMismatch {
		t.Fatalf("a wrong checksum: %v", err)
	}
	if _, err := os.Stat(snap); !os.IsNotExist(err) {
		t.Fatalf("a refused snapshot stays on disk: %v", err)
	}
	if err := Fetch(ctx, sink, snap, Expect{SHA256: res.SHA256, Size: res.Size}); err != nil {
		t.Fatal(err)
	}

	// Restore with the real etcdutl, start etcd on the result: every key is there.
	restored := restoreAndStart(t, snap, filepath.Join(dir, "data"))
	resp, err := restored.Get(ctx, "k", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 500 || string(resp.Kvs[499].Value) != "v00499" || resp.Header.Revision < res.Revision {
		t.Fatalf("restored %d keys at revision %d, want 500 at ≥ %d", len(resp.Kvs), resp.Header.Revision, res.Revision)
	}
	if _, err := os.Stat(snap); !os.IsNotExist(err) {
		t.Errorf("the snapshot file is kept after a restore: %v", err)
	}
}

// etcdutl is the version-matched etcdutl built by hack/tools (make envtest-assets links it into bin/).
func etcdutl(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../bin/etcdutl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("etcdutl not built: run make envtest-assets (%v)", err)
	}
	return p
}

// restoreAndStart restores snap into dataDir as a one-member cluster and serves it.
func restoreAndStart(t *testing.T, snap, dataDir string) *clientv3.Client {
	t.Helper()
	m := etcdtest.NewMemberURLs(t, "r0")
	cfg := RestoreConfig{Etcdutl: etcdutl(t), Snapshot: snap, DataDir: dataDir, Name: m.Name,
		InitialCluster: m.Name + "=" + m.PeerURL, InitialClusterToken: "restored", InitialAdvertisePeerURLs: m.PeerURL}
	if err := Restore(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// A second run (a restarted init container) finds the data directory and does nothing.
	if err := Restore(context.Background(), cfg); err != nil {
		t.Fatalf("second restore: %v", err)
	}
	return etcdtest.ServeRestored(t, m, dataDir)
}

func TestRestoreRefusesACorruptSnapshot(t *testing.T) {
	ms := etcdtest.StartCluster(t, 1)
	putKeys(t, etcdtest.ClientURLs(ms), 10)
	dir := t.TempDir()
	snap := filepath.Join(dir, "snapshot.db")
	res, err := Take(context.Background(), etcdtest.ClientURLs(ms), nil, &File{Path: snap, Location: "pvc://x/snapshot.db"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Location != "pvc://x/snapshot.db" {
		t.Errorf("location %s", res.Location)
	}
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff // a raw source has no record to compare with: etcd's own hash must catch it
	if err := os.WriteFile(snap, b, 0o600); err != nil {
		t.Fatal(err)
	}
	m := etcdtest.NewMemberURLs(t, "r0")
	data := filepath.Join(dir, "data")
	err = Restore(context.Background(), RestoreConfig{Etcdutl: etcdutl(t), Snapshot: snap, DataDir: data, Name: m.Name,
		InitialCluster: m.Name + "=" + m.PeerURL, InitialClusterToken: "x", InitialAdvertisePeerURLs: m.PeerURL})
	if f := reasonOf(t, err); f.Reason != reason.SnapshotCorrupt || !f.Permanent {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	if Restored(data) {
		t.Fatal("a refused restore left a data directory")
	}
}

func TestS3FailuresLeaveNothing(t *testing.T) {
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "backups")
	ms := etcdtest.StartCluster(t, 1)
	ctx := context.Background()
	base := S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: "x.db", PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}

	cases := map[string]struct {
		mutate func(s *S3)
		reason reason.Reason
	}{
		"wrong secret":   {func(s *S3) { s.SecretKey = "not-the-secret" }, reason.InvalidCredentials},
		"unknown key":    {func(s *S3) { s.AccessKey = "nobody" }, reason.InvalidCredentials},
		"missing bucket": {func(s *S3) { s.Bucket = "no-such-bucket" }, reason.BucketNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := base
			tc.mutate(&s)
			_, err := Take(ctx, etcdtest.ClientURLs(ms), nil, &s)
			if f := reasonOf(t, err); f.Reason != tc.reason || !f.Permanent {
				t.Fatalf("got %v, want permanent %s", err, tc.reason)
			}
		})
	}

	// A stream that breaks midway (after more than one part) is aborted: no object, no pending upload.
	broken := io.MultiReader(io.LimitReader(zeros{}, PartSize+1<<20), errReader{})
	if _, err := base.Write(ctx, broken); err == nil {
		t.Fatal("a broken stream was stored")
	}
	mc := mio.Client(t)
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("object left behind: %s %v", o.Key, o.Err)
	}
	for u := range mc.ListIncompleteUploads(ctx, bucket, "", true) {
		t.Errorf("incomplete upload left behind: %s %v", u.Key, u.Err)
	}
}

// A restore names a snapshot that may not exist (a typo, a deleted object): Fetch says so at once,
// permanently and under the right reason, and leaves no file for etcdutl.
func TestFetchOfAMissingSnapshotIsRefusedAtOnce(t *testing.T) {
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "backups")
	ctx := context.Background()
	cases := map[string]struct {
		bucket string
		reason reason.Reason
	}{
		"missing object": {bucket, reason.SnapshotNotFound},
		"missing bucket": {"no-such-bucket", reason.BucketNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := &S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: tc.bucket, Key: "nothing-here.db", PathStyle: true,
				AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}
			snap := filepath.Join(t.TempDir(), "snapshot.db")
			err := Fetch(ctx, src, snap, Expect{})
			if f := reasonOf(t, err); f.Reason != tc.reason || !f.Permanent {
				t.Fatalf("got %v, want permanent %s", err, tc.reason)
			}
			if _, err := os.Stat(snap); !os.IsNotExist(err) {
				t.Fatalf("a file was left for a snapshot that does not exist: %v", err)
			}
		})
	}
}

func TestFileWriteIsAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	f := &File{Path: filepath.Join(dir, "sub", "b.db"), Location: "pvc://c/sub/b.db"}
	if err := f.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(context.Background(), io.MultiReader(strings.NewReader("partial"), errReader{})); err == nil {
		t.Fatal("a broken stream was stored")
	}
	left, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(left) != 0 {
		t.Fatalf("files left behind: %v", left)
	}
	if _, err := f.Write(context.Background(), bytes.NewReader([]byte("whole"))); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.Path); string(b) != "whole" {
		t.Fatalf("stored %q", b)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("stream broke") }

func TestVerifyServesTheSnapshotAtItsRevision(t *testing.T) {
	ms := etcdtest.StartCluster(t, 1)
	putKeys(t, etcdtest.ClientURLs(ms), 50)
	dir := t.TempDir()
	snap := filepath.Join(dir, "b.db")
	res, err := Take(context.Background(), etcdtest.ClientURLs(ms), nil, &File{Path: snap, Location: "pvc://x/b.db"})
	if err != nil {
		t.Fatal(err)
	}
	etcdBin := filepath.Join(filepath.Dir(etcdutl(t)), "etcd")
	want := Expect{SHA256: res.SHA256, Size: res.Size}
	got, err := Verify(context.Background(), &File{Path: snap}, want, VerifyConfig{Etcd: etcdBin, Etcdutl: etcdutl(t), WorkDir: filepath.Join(dir, "w1"), Revision: res.Revision})
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision < res.Revision || got.EtcdVersion == "" {
		t.Fatalf("verified %+v, backup %+v", got, res)
	}
	// A revision the snapshot cannot hold (say, the record of another backup) fails the check.
	_, err = Verify(context.Background(), &File{Path: snap}, want, VerifyConfig{Etcd: etcdBin, Etcdutl: etcdutl(t), WorkDir: filepath.Join(dir, "w2"), Revision: res.Revision + 1000})
	if f := reasonOf(t, err); f.Reason != reason.VerifyFailed {
		t.Fatalf("a too new revision: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "w1")); !os.IsNotExist(err) {
		t.Errorf("the scratch directory is kept: %v", err)
	}
}

// fillUntilNOSPACE writes 4 KiB values until the cluster refuses writes with NOSPACE; it returns
// every key and value that was acknowledged.
func fillUntilNOSPACE(t *testing.T, cl *clientv3.Client) map[string]string {
	t.Helper()
	acked := map[string]string{}
	value := strings.Repeat("x", 4096)
	for i := 0; ; i++ {
		k, v := fmt.Sprintf("fill/%06d", i), fmt.Sprintf("%06d%s", i, value)
		_, err := cl.Put(context.Background(), k, v)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return acked
		}
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		acked[k] = v
		if i > 10_000 {
			t.Fatal("no NOSPACE after 40 MiB of writes")
		}
	}
}

// TestBackupWhileNOSPACE: a cluster whose database hit its quota (NOSPACE raised, every member's
// status reports the alarm) is still backed up from a follower, and the snapshot restores with
// every acknowledged key.
func TestBackupWhileNOSPACE(t *testing.T) {
	const quota = 2 << 20
	ms := etcdtest.StartClusterWith(t, 3, func(c *embed.Config) { c.QuotaBackendBytes = quota })
	cl := putKeys(t, etcdtest.ClientURLs(ms), 0)
	ctx := context.Background()
	acked := fillUntilNOSPACE(t, cl)
	alarms, err := cl.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(alarms.Alarms) == 0 || alarms.Alarms[0].Alarm != etcdserverpb.AlarmType_NOSPACE {
		t.Fatalf("alarms %+v: want NOSPACE", alarms.Alarms)
	}
	// Every member reports the cluster's alarm in its status: that is what used to rule them all out.
	for _, m := range ms {
		st, err := cl.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Errors) == 0 {
			t.Fatalf("%s reports no alarm in its status", m.Name)
		}
	}
	t.Logf("%d keys acknowledged before NOSPACE (quota %d bytes)", len(acked), quota)

	dir := t.TempDir()
	snap := filepath.Join(dir, "nospace.db")
	res, err := Take(ctx, etcdtest.ClientURLs(ms), nil, &File{Path: snap, Location: "pvc://x/nospace.db"})
	if err != nil {
		t.Fatalf("backup under NOSPACE: %v", err)
	}
	st, err := cl.Status(ctx, ms[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if res.Member == fmt.Sprintf("%x", st.Leader) {
		t.Errorf("snapshot taken from the leader %s although followers could serve it", res.Member)
	}
	t.Logf("backup under NOSPACE: %d bytes at revision %d from %s", res.Size, res.Revision, res.Member)

	// NOSPACE refuses writes, so the source still holds exactly what the snapshot holds. (The put
	// that crossed the quota was applied although it returned NOSPACE: etcd checks the quota
	// before applying and reports after.)
	source := keyValues(t, cl, "fill/")
	restored := keyValues(t, restoreAndStart(t, snap, filepath.Join(dir, "data")), "fill/")
	if len(restored) != len(source) {
		t.Fatalf("restored %d keys, the source holds %d", len(restored), len(source))
	}
	for k, v := range source {
		if restored[k] != v {
			t.Fatalf("restored %s = %.12q…, want %.12q…", k, restored[k], v)
		}
	}
	for k := range acked {
		if _, ok := restored[k]; !ok {
			t.Fatalf("acknowledged key %s was not restored", k)
		}
	}
}

func keyValues(t *testing.T, cl *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	resp, err := cl.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// TestBackupAvoidsAMemberWithACorruptAlarm: a CORRUPT alarm raised on one follower rules out that
// member only; the snapshot comes from the other follower.
func TestBackupAvoidsAMemberWithACorruptAlarm(t *testing.T) {
	ms := etcdtest.StartCluster(t, 3)
	cl := putKeys(t, etcdtest.ClientURLs(ms), 10)
	ctx := context.Background()
	ids := map[uint64]string{}
	var leader uint64
	for _, m := range ms {
		st, err := cl.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		ids[st.Header.MemberId], leader = m.ClientURL, st.Leader
	}
	var corrupt uint64
	for id := range ids {
		if id != leader {
			corrupt = id
			break
		}
	}
	if _, err := etcdserverpb.NewMaintenanceClient(cl.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: corrupt, Alarm: etcdserverpb.AlarmType_CORRUPT}); err != nil {
		t.Fatal(err)
	}
	// The corrupt member first: it answers, knows the leader and is a voter, yet is passed over.
	endpoints := []string{ids[corrupt]}
	for id, ep := range ids {
		if id != corrupt {
			endpoints = append(endpoints, ep)
		}
	}
	ecl, err := etcdclient.New(endpoints, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ecl.Close() }()
	_, st, err := pickMember(ctx, ecl, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID == corrupt || st.ID == leader {
		t.Fatalf("picked %x; corrupt %x, leader %x: want the other follower", st.ID, corrupt, leader)
	}
}
