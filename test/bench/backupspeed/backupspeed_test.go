//go:build bench

// Package backupspeed reproduces the backup Job's figures of TestBackupBench (test/bench) on
// loopback, without a Kubernetes cluster: one etcd process of bin/etcd (the bench's version) with
// client TLS and a ≥ 1 GiB database of incompressible 1 MiB values, one MinIO process (miniotest),
// and alternately the bench's baseline (`etcdctl snapshot save` to local disk, then minio-go
// FPutObject of that file) and `worker backup` of this tree run with the Job's flags. Each run's
// seconds (the worker's report, as the bench reads them), CPU and peak memory (localetcd.RunPeak)
// are logged; so are the parts a backup cannot go below: the HashKV the worker asks for, the
// snapshot stream read from etcd and thrown away, and an upload of as many bytes from memory
// through the worker's own S3 sink. It writes no results: the cluster's figures stay
// TestBackupBench's.
//
//	go test -tags bench ./test/bench/backupspeed/ -run '^TestBackupLoopback$' -count=1 -v -timeout 30m
//
// BENCH_REPS (3) sets the repetitions, BENCH_DB_MIB (1088) the database size, BENCH_ETCD_DIR a
// directory for the member's data that outlives the run (filled once), BENCH_COMPARE worker
// binaries (comma-separated: other commits' builds) run after this tree's in every repetition, and
// BENCH_PROFILE a directory where a CPU profile of one in-process backup.Take is written.
package backupspeed

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
	"github.com/etcd-autopilot/etcd-autopilot/test/bench/localetcd"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const (
	repoRoot = "../../.."
	bucket   = "bench"
	// serverName is the name in the member's certificate that the worker verifies, as the Job
	// verifies the client Service's name.
	serverName = "etcd.bench.svc"
)

// member is the etcd process and what reaches it: its client URL and a directory of client
// certificate files (tls.crt, tls.key, ca.crt, as the Job mounts them).
type member struct {
	endpoint, certDir string
	tlsConfig         *tls.Config
	// tls is the Job's snapshot client (etcdclient.NewForSnapshot) of the member.
	tls *etcdclient.Client
}

// workerFigures are one worker binary's runs.
type workerFigures struct {
	bin                        string
	secs, cpu, rss, file, anon []float64
}

func TestBackupLoopback(t *testing.T) {
	reps := localetcd.EnvInt(t, "BENCH_REPS", 3)
	dbTarget := int64(localetcd.EnvInt(t, "BENCH_DB_MIB", 1088)) << 20
	bin, err := filepath.Abs(localetcd.Binary(t, repoRoot))
	if err != nil {
		t.Fatal(err)
	}
	etcdctl := filepath.Join(filepath.Dir(bin), "etcdctl")
	workers := []*workerFigures{{bin: buildWorker(t)}}
	if others := os.Getenv("BENCH_COMPARE"); others != "" {
		for _, b := range strings.Split(others, ",") {
			workers = append(workers, &workerFigures{bin: b})
		}
	}
	m := startMember(t, bin)
	dbSize := fill(t, m, dbTarget)
	mio := miniotest.Start(t)
	mio.MakeBucket(t, bucket)
	mc := mio.Client(t)
	ctx := context.Background()
	snapDir := t.TempDir()

	if dir := os.Getenv("BENCH_PROFILE"); dir != "" {
		profileTake(t, dir, m, mio)
	}
	var baseSecs, saveSecs, hashSecs, readSecs, uploadSecs []float64
	var size int64
	for r := 1; r <= reps; r++ {
		// The baseline, as TestBackupBench runs it: save to local disk, then upload the file.
		snap := filepath.Join(snapDir, "etcdctl.db")
		_ = os.Remove(snap)
		start := time.Now()
		run(t, etcdctl, "--endpoints="+m.endpoint, "--cacert="+filepath.Join(m.certDir, pki.CACertKey),
			"--cert="+filepath.Join(m.certDir, pki.CertKey), "--key="+filepath.Join(m.certDir, pki.PrivKeyKey),
			"--insecure-skip-tls-verify", "snapshot", "save", snap)
		saved := time.Since(start).Seconds()
		if _, err := mc.FPutObject(ctx, bucket, fmt.Sprintf("etcdctl/%d.db", r), snap, minio.PutObjectOptions{}); err != nil {
			t.Fatalf("upload the etcdctl snapshot: %v", err)
		}
		saveSecs, baseSecs = append(saveSecs, saved), append(baseSecs, time.Since(start).Seconds())
		t.Logf("rep %d (load %s): etcdctl save %.2fs + upload = %.2fs", r, localetcd.LoadAvg(), saved, baseSecs[r-1])

		for i, w := range workers {
			res, mem, ru := backupJob(t, w.bin, m, mio, fmt.Sprintf("worker/%d-%d.db", i, r))
			cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			w.secs, w.cpu = append(w.secs, res.Seconds), append(w.cpu, cpu)
			w.rss, w.file, w.anon = append(w.rss, mem.RSS), append(w.file, mem.File), append(w.anon, mem.Anon)
			size = res.Size
			t.Logf("rep %d (load %s): %s %.2fs (CPU %.2fs, peak RSS %.1f MiB: file %.1f, anon %.1f)",
				r, localetcd.LoadAvg(), w.bin, res.Seconds, cpu, mem.RSS, mem.File, mem.Anon)
		}

		hashSecs, readSecs = append(hashSecs, hashKVTime(t, m)), append(readSecs, readFloor(t, m))
		uploadSecs = append(uploadSecs, uploadFloor(t, mio, size, fmt.Sprintf("floor/%d.db", r)))
		t.Logf("rep %d (load %s): HashKV alone %.2fs | floors: read to /dev/null %.2fs, upload from memory %.2fs",
			r, localetcd.LoadAvg(), hashSecs[r-1], readSecs[r-1], uploadSecs[r-1])
	}
	med := framework.Median
	t.Logf("database %.2f GiB, %d runs, medians: etcdctl save %.2fs, save + upload %.2fs; HashKV %.2fs; floors: read %.2fs, upload %.2fs",
		float64(dbSize)/(1<<30), reps, med(saveSecs), med(baseSecs), med(hashSecs), med(readSecs), med(uploadSecs))
	for _, w := range workers {
		fixed := fixedRSS(t, w.bin, mio)
		t.Logf("%s: %.2fs = %.2f× the baseline (goal ≤ 1.1×), CPU %.2fs, peak RSS max %.1f MiB (file %.1f, anon %.1f; goal < 32); binary %.1f MiB, a backup that finds no member: peak RSS %.1f MiB (file %.1f, anon %.1f)",
			w.bin, med(w.secs), med(w.secs)/med(baseSecs), med(w.cpu), maxOf(w.rss), maxOf(w.file), maxOf(w.anon), fileMiB(t, w.bin), fixed.RSS, fixed.File, fixed.Anon)
	}
}

// backupJob runs the Job's command with the Job's flags (resources.BackupJob) and returns its
// report, peak memory and resource usage. Its seconds are the report's, as the bench's are.
func backupJob(t *testing.T, worker string, m *member, mio *miniotest.Server, key string) (*backup.Result, localetcd.Peak, *syscall.Rusage) {
	t.Helper()
	termLog := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(worker, "backup", "--endpoints="+m.endpoint, "--s3-bucket="+bucket, "--s3-key="+key,
		"--s3-region=us-east-1", "--s3-endpoint="+mio.URL, "--s3-path-style", "--tls-dir="+m.certDir, "--server-name="+serverName,
		"--termination-log="+termLog)
	cmd.Env = append(os.Environ(), backup.EnvAccessKey+"="+mio.AccessKey, backup.EnvSecretKey+"="+mio.SecretKey)
	mem, err := localetcd.RunPeak(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return report(t, termLog), mem, cmd.ProcessState.SysUsage().(*syscall.Rusage)
}

// startMember runs one etcd member of bin with client TLS (certificates of a fresh CA) on loopback.
func startMember(t *testing.T, bin string) *member {
	t.Helper()
	ca, _, err := pki.NewCA("bench-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(serverName, []string{serverName}, []net.IP{net.ParseIP("127.0.0.1")}, pki.ServerAndClient, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := ca.Issue("root", nil, nil, pki.ClientOnly, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serverDir, certDir := writeFiles(t, server), writeFiles(t, clientCert)
	dir := os.Getenv("BENCH_ETCD_DIR") // kept between runs: its database is filled once
	if dir == "" {
		dir = t.TempDir()
	}
	client, peer, metrics := loopback.FreeAddr(t), "http://"+loopback.FreeAddr(t), "http://"+loopback.FreeAddr(t)
	m := &member{endpoint: "https://" + client, certDir: certDir}
	log, err := os.OpenFile(filepath.Join(dir, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--name=b0", "--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+m.endpoint, "--advertise-client-urls="+m.endpoint,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=b0="+peer,
		"--listen-metrics-urls="+metrics, "--quota-backend-bytes=3221225472",
		"--cert-file="+filepath.Join(serverDir, pki.CertKey), "--key-file="+filepath.Join(serverDir, pki.PrivKeyKey),
		"--trusted-ca-file="+filepath.Join(serverDir, pki.CACertKey), "--client-cert-auth")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
	})
	deadline := time.Now().Add(time.Minute)
	for !localetcd.Healthy(metrics) {
		if time.Now().After(deadline) {
			t.Fatalf("etcd not healthy after a minute; log in %s", log.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	pair, err := tls.X509KeyPair(clientCert[pki.CertKey], clientCert[pki.PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	m.tlsConfig = etcdclient.TLSConfig(pair, pool, serverName)
	if m.tls, err = etcdclient.NewForSnapshot(m.endpoint, m.tlsConfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.tls.Close() })
	return m
}

func writeFiles(t *testing.T, data map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range data {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fill writes incompressible 1 MiB values, as TestBackupBench does, four at a time, until the
// database holds at least target bytes.
func fill(t *testing.T, m *member, target int64) int64 {
	t.Helper()
	cl := m.tls.Raw()
	ctx := context.Background()
	start := time.Now()
	for i := 0; ; i += 64 {
		st, err := cl.Status(ctx, m.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if st.DbSize >= target {
			t.Logf("database: %d bytes (%d values of 1 MiB) in %s", st.DbSize, i, time.Since(start).Round(time.Second))
			return st.DbSize
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := range 4 {
			wg.Go(func() {
				val := make([]byte, 1<<20)
				for j := i + w; j < i+64; j += 4 {
					_, _ = rand.Read(val)
					if _, err := cl.Put(ctx, fmt.Sprintf("big/%06d", j), string(val)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// hashKVTime is the seconds of the HashKV the worker asks of the member before its snapshot (the
// keyspace hash its manifest records).
func hashKVTime(t *testing.T, m *member) float64 {
	t.Helper()
	ctx := context.Background()
	st, err := m.tls.Status(ctx, m.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := m.tls.HashKV(ctx, m.endpoint, st.Revision); err != nil {
		t.Fatal(err)
	}
	return time.Since(start).Seconds()
}

// readFloor is the seconds to read the member's snapshot stream and throw it away: no hash, no
// upload, over the Job's own snapshot client.
func readFloor(t *testing.T, m *member) float64 {
	t.Helper()
	start := time.Now()
	s, err := m.tls.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := io.Copy(io.Discard, s); err != nil {
		t.Fatal(err)
	}
	return time.Since(start).Seconds()
}

// sized is size bytes of one repeated buffer, announcing its size as a snapshot does, so the
// worker's S3 sink streams it exactly as it streams a snapshot.
type sized struct {
	buf       []byte
	size, off int64
}

func (s *sized) Announced() int64 { return s.size }

func (s *sized) Read(p []byte) (int, error) {
	if s.off == s.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.size-s.off)]
	n := 0
	for n < len(p) {
		n += copy(p[n:], s.buf[(s.off+int64(n))%int64(len(s.buf)):])
	}
	s.off += int64(n)
	return n, nil
}

// uploadFloor is the seconds to upload size bytes from memory through the worker's S3 sink.
func uploadFloor(t *testing.T, mio *miniotest.Server, size int64, key string) float64 {
	t.Helper()
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	s3 := &backup.S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: key, PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}
	start := time.Now()
	if _, err := s3.Write(context.Background(), &sized{buf: buf, size: size}); err != nil {
		t.Fatal(err)
	}
	return time.Since(start).Seconds()
}

// profileTake writes a CPU profile of one backup.Take run in this process to dir/cpu.pprof.
func profileTake(t *testing.T, dir string, m *member, mio *miniotest.Server) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	s3 := &backup.S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: "profile.db", PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey}
	runtime.GC()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = backup.Take(context.Background(), []string{m.endpoint}, m.tlsConfig, s3)
	pprof.StopCPUProfile()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("profiled backup.Take: %.2fs; go tool pprof %s", time.Since(start).Seconds(), f.Name())
}

// run runs bin.
func run(t *testing.T, bin string, args ...string) {
	t.Helper()
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
}

func report(t *testing.T, termLog string) *backup.Result {
	t.Helper()
	b, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	rep, ok := backup.ParseReport(string(b))
	if !ok || rep.Result == nil {
		t.Fatalf("worker backup reported %s", b)
	}
	return rep.Result
}

// fixedRSS is the peak memory of a backup that fails before any snapshot: it checks the bucket,
// then finds no member at a closed port. What the binary, the runtime and the clients cost alone.
func fixedRSS(t *testing.T, worker string, mio *miniotest.Server) localetcd.Peak {
	t.Helper()
	cmd := exec.Command(worker, "backup", "--endpoints=https://"+loopback.FreeAddr(t), "--s3-bucket="+bucket, "--s3-key=fixed.db",
		"--s3-endpoint="+mio.URL, "--s3-path-style", "--termination-log=")
	cmd.Env = append(os.Environ(), backup.EnvAccessKey+"="+mio.AccessKey, backup.EnvSecretKey+"="+mio.SecretKey)
	mem, err := localetcd.RunPeak(cmd)
	if err == nil {
		t.Fatal("a backup of no member succeeded")
	}
	return mem
}

func fileMiB(t *testing.T, path string) float64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return float64(st.Size()) / (1 << 20)
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// buildWorker builds cmd/worker of this tree as the image does (static, stripped: Dockerfile).
func buildWorker(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "worker")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/worker")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/worker: %v\n%s", err, strings.TrimSpace(string(b)))
	}
	return out
}
