package archive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// TestWorkerVerifyChecksSnapshotAndChain: `worker verify` with the archive that continues the
// snapshot test-restores the snapshot (its keyspace hash compared with the manifest's) and then
// replays the whole chain onto it, so one byte flipped in any segment fails the verification as a
// broken chain, permanently, naming the segment.
func TestWorkerVerifyChecksSnapshotAndChain(t *testing.T) {
	ctx := context.Background()
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "verify")
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	w := startWriter(t, &Writer{Client: dial(t, ms[0].ClientURL), Dest: s3Dest(mio, bucket, "prod/chain/"),
		FlushInterval: 50 * time.Millisecond, MaxSegmentBytes: 1, StartRevision: head(t, cl) + 1})
	snap, final := snapshotAmidArchive(t, cl, w, ms[0].ClientURL, &backup.S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket,
		Key: "prod/full.db", PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey})
	t.Setenv(backup.EnvAccessKey, mio.AccessKey)
	t.Setenv(backup.EnvSecretKey, mio.SecretKey)
	verify := func() (int, backup.Report) {
		t.Helper()
		dir := t.TempDir()
		term := filepath.Join(dir, "termination-log")
		var out bytes.Buffer
		code := backup.VerifyMain(ctx, []string{"--etcdutl=" + binaryPath(t, "etcdutl"), "--etcd=" + binaryPath(t, "etcd"),
			"--termination-log=" + term, "--work-dir=" + filepath.Join(dir, "scratch"), "--sha256=" + snap.SHA256, fmt.Sprintf("--size=%d", snap.Size),
			fmt.Sprintf("--revision=%d", snap.Revision), "--s3-endpoint=" + mio.URL, "--s3-bucket=" + bucket, "--s3-path-style",
			"--s3-key=prod/full.db", "--archive-prefix=prod/chain/"}, &out, &PointInTime{})
		b, _ := os.ReadFile(term)
		rep, _ := backup.ParseReport(string(b))
		return code, rep
	}
	code, rep := verify()
	if code != backup.ExitOK || rep.Result == nil || !rep.Result.KeyspaceVerified || rep.Result.Chain == nil || rep.Result.Chain.Revision != final {
		t.Fatalf("an untouched snapshot and chain: exit %d, report %+v (chain %+v); want verified, replayed to %d", code, rep, rep.Result.Chain, final)
	}

	// One byte flipped in a segment after the snapshot.
	mc := mio.Client(t)
	var victim string
	for obj := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "prod/chain/", Recursive: true}) {
		if first, _, ok := ParseName(strings.TrimPrefix(obj.Key, "prod/chain/")); ok && first > snap.Revision+2 && victim == "" {
			victim = obj.Key
		}
	}
	if victim == "" {
		t.Fatal("no segment after the snapshot")
	}
	o, err := mc.GetObject(ctx, bucket, victim, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(o)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if _, err := mc.PutObject(ctx, bucket, victim, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	code, rep = verify()
	if code != backup.ExitPermanent || rep.Reason != reason.ArchiveChainBroken || !strings.Contains(rep.Message, "Corrupt") || !strings.Contains(rep.Message, filepath.Base(victim)) {
		t.Fatalf("a flipped segment byte: exit %d, report %+v; want a permanent ArchiveChainBroken naming %s", code, rep, victim)
	}
}
