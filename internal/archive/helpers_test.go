package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

func binaryPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs("../../bin/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not built: run make envtest-assets (%v)", name, err)
	}
	return p
}

func dial(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	return dialAs(t, "", "", endpoints...)
}

// dialAs dials as user (none: "").
func dialAs(t *testing.T, user, password string, endpoints ...string) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func s3Dest(mio *miniotest.Server, bucket, prefix string) *S3Destination {
	return &S3Destination{S3: backup.S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: prefix, PathStyle: true,
		AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}}
}

// running is a writer in a goroutine; kill stops it as a crash would (what it had not stored is lost).
type running struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	last   int64
}

func startWriter(t *testing.T, w *Writer) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	w.Log = testr.New(t)
	w.Flushed = func(h Header) { r.mu.Lock(); r.last = h.Last; r.mu.Unlock() }
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { r.kill(t) })
	return r
}

func (r *running) archived() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *running) kill(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("writer: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(30 * time.Second):
		t.Error("the writer did not stop")
	}
}

// waitArchived waits until the writer stored revision rev (or fails the test after a minute).
func (r *running) waitArchived(t *testing.T, rev int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for r.archived() < rev {
		if time.Now().After(deadline) {
			t.Fatalf("archive at %d after a minute, want %d", r.archived(), rev)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func head(t *testing.T, cl *clientv3.Client) int64 {
	t.Helper()
	resp, err := cl.Get(context.Background(), "\x00", clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// keyspace is every key at rev (0: the current revision).
func keyspace(t *testing.T, cl *clientv3.Client, rev int64) []*mvccpb.KeyValue {
	t.Helper()
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cl.Get(context.Background(), "\x00", opts...)
	if err != nil {
		t.Fatalf("read the keyspace at %d: %v", rev, err)
	}
	return resp.Kvs
}

// sameKeyspace compares every field of every key: values, revisions, versions and leases.
func sameKeyspace(got, want []*mvccpb.KeyValue) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d keys, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.CreateRevision != w.CreateRevision ||
			g.ModRevision != w.ModRevision || g.Version != w.Version || g.Lease != w.Lease {
			return fmt.Errorf("key %d: got %s, want %s", i, g.String(), w.String())
		}
	}
	return nil
}

// restoreAndServe restores snap the way a member's restore does (bumped revision, marked
// compacted) and serves it.
func restoreAndServe(t *testing.T, snap string, bump int64) *clientv3.Client {
	t.Helper()
	m := etcdtest.NewMemberURLs(t, "r0")
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := backup.Restore(context.Background(), backup.RestoreConfig{Etcdutl: binaryPath(t, "etcdutl"), Snapshot: snap, DataDir: dataDir,
		Name: m.Name, InitialCluster: m.Name + "=" + m.PeerURL, InitialClusterToken: "restored", InitialAdvertisePeerURLs: m.PeerURL,
		BumpRevision: bump}); err != nil {
		t.Fatal(err)
	}
	return etcdtest.ServeRestored(t, m, dataDir)
}

// copyFile gives each replay its own copy of the full snapshot (a replay consumes it).
func copyFile(t testing.TB, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "full.db")
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}
