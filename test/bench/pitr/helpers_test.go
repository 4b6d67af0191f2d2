//go:build bench

package pitr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
	"github.com/etcd-autopilot/etcd-autopilot/test/bench/localetcd"
)

const (
	repoRoot = "../../.."
	// keyPrefix holds the writer's keys; keys is how many it overwrites in turn.
	keyPrefix = "/pitr/"
	keys      = 1000
	// valueSize is the size of a written value: its write time, then padding.
	valueSize = 256
	// putTimeout bounds one operation of the writer; a failed one counts with the time it took.
	putTimeout = 10 * time.Second
)

// env is what every measurement shares: the binaries (etcd, etcdutl, the worker built from this
// tree) and one MinIO with one bucket.
type env struct {
	etcd, etcdutl, worker string
	mio                   *miniotest.Server
	bucket                string
	logs                  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{logs: t.TempDir()}
	var err error
	if e.etcd, err = filepath.Abs(localetcd.Binary(t, repoRoot)); err != nil {
		t.Fatal(err)
	}
	e.etcdutl = filepath.Join(filepath.Dir(e.etcd), "etcdutl")
	if _, err := os.Stat(e.etcdutl); err != nil {
		t.Fatalf("etcdutl beside etcd: %v", err)
	}
	e.worker = buildWorker(t)
	e.mio = miniotest.Start(t)
	e.bucket = e.mio.MakeBucket(t, "pitr")
	return e
}

var built struct {
	once sync.Once
	path string
	err  error
}

// TestMain removes the worker built for the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		_ = os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

// buildWorker builds cmd/worker of this tree once per run (a directory that outlives the tests).
func buildWorker(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "pitr-bench-worker-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "worker")
		cmd := exec.Command("go", "build", "-o", built.path, "./cmd/worker")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/worker: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// credentials are the S3 credentials the worker reads from its environment.
func (e *env) credentials() []string {
	return append(os.Environ(), backup.EnvAccessKey+"="+e.mio.AccessKey, backup.EnvSecretKey+"="+e.mio.SecretKey)
}

func (e *env) s3(key string) *backup.S3 {
	return &backup.S3{Endpoint: e.mio.URL, Region: "us-east-1", Bucket: e.bucket, Key: key, PathStyle: true,
		AccessKey: e.mio.AccessKey, SecretKey: e.mio.SecretKey}
}

// chainObjects says how many segment objects the chain under prefix holds, and their bytes: what a
// restore replaying it fetches (the worker merges old one-second segments).
func (e *env) chainObjects(t *testing.T, prefix string) (int, int64) {
	t.Helper()
	objs, err := (&archive.S3Destination{S3: *e.s3(prefix)}).Objects(context.Background())
	if err != nil {
		t.Fatalf("list the chain: %v", err)
	}
	var size int64
	for _, o := range objs {
		size += o.Size
	}
	return len(objs), size
}

// snapshot stores a full snapshot of c at key, as a backup Job does (backup.Take).
func (e *env) snapshot(t *testing.T, c *localetcd.Cluster, key string) backup.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := backup.Take(ctx, c.Endpoints(), nil, e.s3(key))
	if err != nil {
		t.Fatalf("full snapshot to %s: %v", key, err)
	}
	return res
}

// --- the archive worker ---------------------------------------------------------------------------

// archiver is one `worker archive run` process, with its default flush settings.
type archiver struct {
	cmd    *exec.Cmd
	exited chan struct{}
	status string
}

func (e *env) startArchiver(t *testing.T, c *localetcd.Cluster, prefix string) *archiver {
	t.Helper()
	addr := loopback.FreeAddr(t)
	a := &archiver{status: "http://" + addr + "/status", exited: make(chan struct{})}
	a.cmd = exec.Command(e.worker, "archive", "run", "--endpoints="+strings.Join(c.Endpoints(), ","),
		"--s3-endpoint="+e.mio.URL, "--s3-bucket="+e.bucket, "--s3-path-style", "--s3-prefix="+prefix, "--status-address="+addr)
	a.cmd.Env = e.credentials()
	log, err := os.OpenFile(filepath.Join(e.logs, "archive.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	a.cmd.Stdout, a.cmd.Stderr = log, log
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start the archive worker: %v", err)
	}
	go func() {
		_ = a.cmd.Wait()
		_ = log.Close()
		close(a.exited)
	}()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })
	return a
}

// peakRSSMiB is the worker's peak resident memory so far (VmHWM).
func (a *archiver) peakRSSMiB() (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kib / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", a.cmd.Process.Pid)
}

// stop signals the worker and waits for it (SIGTERM: it stops; SIGKILL: it dies).
func (a *archiver) stop(sig syscall.Signal) {
	_ = a.cmd.Process.Signal(sig)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

// waitDurable waits until the worker reports rev durable in the archive.
func (a *archiver) waitDurable(t *testing.T, rev int64) {
	t.Helper()
	a.waitFor(t, fmt.Sprintf("revision %d archived", rev), func(p archive.Progress) bool { return p.LastRevision >= rev })
}

func (a *archiver) waitFor(t *testing.T, what string, done func(archive.Progress) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		p, err := archive.ReadProgress(ctx, a.status)
		cancel()
		if err == nil && done(p) {
			return
		}
		select {
		case <-a.exited:
			t.Fatalf("the archive worker exited before %s", what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 3 minutes: %+v, %v", what, p, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// archiveThenSnapshot starts the archive worker on a new chain at prefix, waits until it watches
// and has stored a first revision (a marker put outside the writer's keys), then stores a full
// snapshot at key: a chain that continues the snapshot without a gap.
func (e *env) archiveThenSnapshot(t *testing.T, c *localetcd.Cluster, prefix, key string) (*archiver, backup.Result) {
	t.Helper()
	a := e.startArchiver(t, c, prefix)
	a.waitFor(t, "archiving", func(p archive.Progress) bool { return p.State == archive.StateArchiving })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	resp, err := c.Client.Put(ctx, "/bench/chain-start", prefix)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	a.waitDurable(t, resp.Header.Revision)
	return a, e.snapshot(t, c, key)
}

func head(t *testing.T, cl *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "head")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// --- the writer ------------------------------------------------------------------------------------

// op is one operation of the writer: when it was scheduled and sent, how long it took from its
// scheduled time, the revision it made.
type op struct {
	at, sent time.Time
	took     time.Duration
	put      bool
	rev      int64
	err      error
}

// writer writes rate operations a second, open loop (each at its scheduled time whatever the ones
// before it are doing), over keys keys in turn. Each put's value starts with its send time; with
// deletes, every tenth operation deletes another key, so that revisions change the keyspace in more
// ways than overwrites. skip, when set, leaves out the operations it is true for.
type writer struct {
	cl      *clientv3.Client
	rate    int
	deletes bool
	skip    func(at time.Time) bool

	mu  sync.Mutex
	ops []op
}

// run writes from from until to, or until stop is closed, and waits for the operations in flight.
func (w *writer) run(from, to time.Time, stop <-chan struct{}) {
	every := time.Second / time.Duration(w.rate)
	pad := strings.Repeat("v", valueSize)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		at := from.Add(time.Duration(i) * every)
		if !at.Before(to) {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Until(at)):
		}
		if w.skip != nil && w.skip(at) {
			continue
		}
		wg.Add(1)
		go func(i int, at time.Time) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), putTimeout)
			defer cancel()
			o := op{at: at, sent: time.Now(), put: !w.deletes || i%10 != 9}
			if o.put {
				v := strconv.FormatInt(o.sent.UnixNano(), 10) + "|"
				var resp *clientv3.PutResponse
				resp, o.err = w.cl.Put(ctx, fmt.Sprintf("%s%04d", keyPrefix, i%keys), v+pad[len(v):])
				if o.err == nil {
					o.rev = resp.Header.Revision
				}
			} else {
				var resp *clientv3.DeleteResponse
				resp, o.err = w.cl.Delete(ctx, fmt.Sprintf("%s%04d", keyPrefix, (i*7)%keys))
				if o.err == nil {
					o.rev = resp.Header.Revision
				}
			}
			o.took = time.Since(at)
			w.mu.Lock()
			w.ops = append(w.ops, o)
			w.mu.Unlock()
		}(i, at)
	}
}

// written are the operations so far.
func (w *writer) written() []op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]op(nil), w.ops...)
}

// writeTime is the send time a value written by writer carries.
func writeTime(value []byte) (time.Time, bool) {
	s, _, ok := strings.Cut(string(value), "|")
	ns, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// keyspace is a hash of every field of every key under keyPrefix at rev (0: now), the revision it
// was read at, and how many keys there are.
func keyspace(ctx context.Context, cl *clientv3.Client, rev int64) (string, int64, int, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev != 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cl.Get(ctx, keyPrefix, opts...)
	if err != nil {
		return "", 0, 0, err
	}
	h := sha256.New()
	for _, kv := range resp.Kvs {
		_, _ = fmt.Fprintf(h, "%q %q %d %d %d %d\n", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
	}
	return hex.EncodeToString(h.Sum(nil)), resp.Header.Revision, len(resp.Kvs), nil
}

// --- restores ----------------------------------------------------------------------------------------

// restored is a `worker restore` run and the member served on its data directory.
type restored struct {
	// took is from the start of `worker restore` until the member served a linearizable read.
	took   time.Duration
	stdout string
	report backup.Report
	cl     *clientv3.Client
}

// timings are the phases `worker restore` reports on its stdout line.
var timings = regexp.MustCompile(`\((download [^)]*)\)`)

func (r restored) phases() string {
	if m := timings.FindStringSubmatch(r.stdout); m != nil {
		return m[1]
	}
	return strings.TrimSpace(r.stdout)
}

// restore runs `worker restore` (the restore init container's command: backup.RestoreMain with
// archive.PointInTime) of the full snapshot snap stored at key into a new data directory, with the
// point-in-time flags of extra, then serves the data directory and waits for a linearizable read.
// The member is served until t ends.
func (e *env) restore(t *testing.T, snap backup.Result, key string, extra ...string) restored {
	t.Helper()
	vol := t.TempDir()
	m := etcdtest.NewMemberURLs(t, "m0")
	dataDir, term := filepath.Join(vol, "data"), filepath.Join(vol, "termination-log")
	args := append([]string{"restore", "--etcdutl=" + e.etcdutl, "--termination-log=" + term,
		"--snapshot=" + filepath.Join(vol, "restore-snapshot.db"), "--data-dir=" + dataDir, "--name=" + m.Name,
		"--initial-cluster=" + m.Name + "=" + m.PeerURL, "--initial-cluster-token=restored", "--initial-advertise-peer-urls=" + m.PeerURL,
		"--sha256=" + snap.SHA256, fmt.Sprintf("--size=%d", snap.Size),
		"--s3-endpoint=" + e.mio.URL, "--s3-bucket=" + e.bucket, "--s3-path-style", "--s3-key=" + key}, extra...)
	start := time.Now()
	cmd := exec.Command(e.worker, args...)
	cmd.Env = e.credentials()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		report, _ := os.ReadFile(term)
		t.Fatalf("worker restore %v: %v\n%s\n%s\n%s", extra, err, report, stdout.String(), stderr.String())
	}
	r := restored{stdout: stdout.String()}
	if b, err := os.ReadFile(term); err == nil {
		r.report, _ = backup.ParseReport(string(b))
	}
	r.cl = etcdtest.ServeRestored(t, m, dataDir)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := r.cl.Get(ctx, "probe")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored member serves no linearizable read after a minute: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.took = time.Since(start)
	return r
}
