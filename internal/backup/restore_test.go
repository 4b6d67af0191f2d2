package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// TestAnObjectReplacedBetweenTwoMembersFetchesIsRefused: initial members that each fetch the
// snapshot restore the same bytes or refuse. Member a restores "latest.db", the object is then
// replaced by a snapshot of another keyspace, and member b, run with the same arguments (the
// SHA-256 the operator gives every member), refuses it: a permanent exit, a report with
// SnapshotChecksumMismatch, and no data directory. (Without a SHA-256 one member only reads the
// snapshot: planner.TestRestoreDecisions and controllers.TestRestoreFromAnObjectWithoutChecksumReadsItOnce.)
func TestAnObjectReplacedBetweenTwoMembersFetchesIsRefused(t *testing.T) {
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "restores")
	ctx := context.Background()
	sink := &S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: "prod/latest.db", PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}
	snapshotOf := func(keys int) Result {
		t.Helper()
		ms := etcdtest.StartCluster(t, 1)
		putKeys(t, etcdtest.ClientURLs(ms), keys)
		res, err := Take(ctx, etcdtest.ClientURLs(ms), nil, sink)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := snapshotOf(10)
	t.Setenv(EnvAccessKey, mio.AccessKey)
	t.Setenv(EnvSecretKey, mio.SecretKey)
	dir := t.TempDir()
	restore := func(member string) (int, Report) {
		t.Helper()
		peer := "http://" + member + ":2380"
		var out bytes.Buffer
		term := filepath.Join(dir, member+".termination-log")
		code := RestoreMain(ctx, []string{"--etcdutl=" + etcdutl(t), "--termination-log=" + term,
			"--snapshot=" + filepath.Join(dir, member+".db"), "--data-dir=" + filepath.Join(dir, member),
			"--name=" + member, "--initial-cluster=a=http://a:2380,b=http://b:2380", "--initial-cluster-token=t",
			"--initial-advertise-peer-urls=" + peer, "--sha256=" + first.SHA256, fmt.Sprintf("--size=%d", first.Size),
			"--s3-endpoint=" + mio.URL, "--s3-bucket=" + bucket, "--s3-key=prod/latest.db", "--s3-path-style"}, &out, nil)
		rep, _ := ParseReport(lastLines(out.String(), 1))
		return code, rep
	}
	if code, rep := restore("a"); code != ExitOK || !Restored(filepath.Join(dir, "a")) {
		t.Fatalf("member a: exit %d, report %+v", code, rep)
	}
	if second := snapshotOf(20); second.SHA256 == first.SHA256 {
		t.Fatal("the replacement has the same bytes")
	}
	code, rep := restore("b")
	if code != ExitPermanent || rep.Reason != reason.SnapshotChecksumMismatch {
		t.Fatalf("member b after the object was replaced: exit %d, report %+v; want a permanent %s", code, rep, reason.SnapshotChecksumMismatch)
	}
	if Restored(filepath.Join(dir, "b")) {
		t.Fatal("member b restored the replaced object")
	}
	if _, err := os.Stat(filepath.Join(dir, "b.db")); !os.IsNotExist(err) {
		t.Fatalf("the refused snapshot stays on disk: %v", err)
	}
}
