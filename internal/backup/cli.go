package backup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Exit codes of `worker backup` and `worker restore`. The backup Job's podFailurePolicy fails
// the Job at once on ExitPermanent (retrying wrong credentials or a tampered snapshot cannot help)
// and retries ExitRetryable up to its backoffLimit.
const (
	ExitOK        = 0
	ExitRetryable = 1
	ExitPermanent = 2
)

// memoryLimit is the backup process's soft memory limit (GOMEMLIMIT): the live heap is small
// clients and buffers (S3 parts are streamed, not buffered: S3.writeStream; the snapshot messages
// are decoded into one reused buffer: etcdclient.Client.Snapshot), and the limit keeps what
// garbage remains from growing the heap past that.
const memoryLimit = 28 << 20

// Env names of the S3 credentials (from the credentials Secret, never on the command line).
const (
	EnvAccessKey = "AWS_ACCESS_KEY_ID"
	EnvSecretKey = "AWS_SECRET_ACCESS_KEY"
)

// Report is what a backup or restore container writes to its termination message, where the
// operator reads it: a result, or a failure reason. It holds no secrets. A plain restore reports
// failures only; a point-in-time restore also reports what it restored (PointInTime).
type Report struct {
	Result      *Result            `json:"result,omitempty"`
	PointInTime *PointInTimeResult `json:"pointInTime,omitempty"`
	Reason      reason.Reason      `json:"reason,omitempty"`
	Message     string             `json:"message,omitempty"`
	// Corrupt are the other backups a test-restore rechecked and found changed (Recheck), whatever
	// became of its own.
	Corrupt []Corruption `json:"corrupt,omitempty"`
}

// watchMemory samples the process's anonymous resident memory (heap, stacks, buffers: what the
// work costs, unlike the binary's file-backed pages, which are shared, reclaimable page cache and
// ~16 MiB of this binary) until the returned func reports its peak and the peak of the whole
// resident memory (VmHWM). Not getrusage's maxrss for the latter: Linux carries the peak of the
// image that exec replaced over into it (the container runtime's init, or a benchmark's test
// process), so it is not this program's own.
func watchMemory() func() (anon, total int64) {
	var mu sync.Mutex
	var anon, total int64
	sample := func() {
		raw, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(raw), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || (f[0] != "RssAnon:" && f[0] != "VmHWM:") {
				continue
			}
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				continue
			}
			mu.Lock()
			if f[0] == "RssAnon:" {
				anon = max(anon, kb*1024)
			} else {
				total = max(total, kb*1024)
			}
			mu.Unlock()
		}
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() (int64, int64) {
		close(stop)
		sample()
		mu.Lock()
		defer mu.Unlock()
		return anon, total
	}
}

// ParseReport reads a termination message; ok is false when it is not a Report.
func ParseReport(msg string) (Report, bool) {
	var r Report
	if err := json.Unmarshal([]byte(strings.TrimSpace(msg)), &r); err != nil || (r.Result == nil && r.PointInTime == nil && r.Reason == "" && len(r.Corrupt) == 0) {
		return Report{}, false
	}
	return r, true
}

// S3Flags reach an S3 bucket: every worker subcommand that reads or writes one registers them.
type S3Flags struct {
	Endpoint, Region, Bucket, SSE string
	PathStyle                     bool
}

// Register adds --s3-endpoint, --s3-region, --s3-bucket, --s3-sse and --s3-path-style to fs.
func (f *S3Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Endpoint, "s3-endpoint", "", "S3 endpoint URL (empty: AWS)")
	fs.StringVar(&f.Region, "s3-region", "us-east-1", "S3 region")
	fs.StringVar(&f.Bucket, "s3-bucket", "", "S3 bucket")
	fs.StringVar(&f.SSE, "s3-sse", "", "server-side encryption: AES256 or aws:kms")
	fs.BoolVar(&f.PathStyle, "s3-path-style", false, "path-style bucket addressing")
}

// S3 is key (an object, or a prefix) in the named bucket, with the credentials from the environment.
func (f *S3Flags) S3(key string) *S3 {
	return &S3{Endpoint: f.Endpoint, Region: f.Region, Bucket: f.Bucket, Key: key, PathStyle: f.PathStyle,
		SSE: f.SSE, AccessKey: os.Getenv(EnvAccessKey), SecretKey: os.Getenv(EnvSecretKey)}
}

// storageFlags name one snapshot location: an S3 object, or a file on a mounted volume.
type storageFlags struct {
	s3                    S3Flags
	s3Key, file, location string
}

func (f *storageFlags) register(fs *flag.FlagSet) {
	f.s3.Register(fs)
	fs.StringVar(&f.s3Key, "s3-key", "", "S3 object key")
	fs.StringVar(&f.file, "file", "", "snapshot file on a mounted volume (instead of S3)")
	fs.StringVar(&f.location, "location", "", "the file's location for humans, e.g. pvc://claim/path")
}

// store is where a snapshot lives for every subcommand: written, read back and deleted.
type store interface {
	Sink
	Source
	Delete(ctx context.Context) error
}

// store is the S3 object when a bucket is named, else the file.
func (f *storageFlags) store() store {
	if f.s3.Bucket == "" {
		return &File{Path: f.file, Location: f.location}
	}
	return f.s3.S3(f.s3Key)
}

// at is the store of another snapshot beside this one: the S3 object key, or the file.
func (f *storageFlags) at(key string) store {
	other := *f
	if other.s3.Bucket != "" {
		other.s3Key = key
	} else {
		other.file, other.location = key, key
	}
	return other.store()
}

// validateWith validates the flags, then the point-in-time flags of pit (nil: none) against them: the
// archive must be where the snapshot is (its S3 bucket, or its volume).
func (f *storageFlags) validateWith(pit PointInTime) error {
	if err := f.validate(); err != nil || pit == nil {
		return err
	}
	var s3 *S3Flags
	if f.s3.Bucket != "" {
		s3 = &f.s3
	}
	return pit.Check(s3)
}

func (f *storageFlags) validate() error {
	if (f.s3.Bucket == "") == (f.file == "") {
		return errors.New("exactly one of --s3-bucket or --file is needed")
	}
	if f.s3.Bucket != "" && f.s3Key == "" {
		return errors.New("--s3-key is needed with --s3-bucket")
	}
	return nil
}

// loadTLS reads a client certificate Secret mounted at dir (tls.crt, tls.key, ca.crt).
func loadTLS(dir, serverName string) (*tls.Config, error) {
	if dir == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.CertKey), filepath.Join(dir, pki.PrivKeyKey))
	if err != nil {
		return nil, fmt.Errorf("load client certificate from %s: %w", dir, err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, pki.CACertKey))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s has no usable CA certificate", dir)
	}
	return etcdclient.TLSConfig(pair, pool, serverName), nil
}

// finish writes the report to the termination log and stdout and returns the exit code.
func finish(out io.Writer, terminationLog string, res *Result, err error) int {
	return finishWith(out, terminationLog, res, err, nil)
}

// finishWith is finish with the other backups a test-restore found corrupt.
func finishWith(out io.Writer, terminationLog string, res *Result, err error, corrupt []Corruption) int {
	rep, code := Report{Result: res, Corrupt: corrupt}, ExitOK
	if err != nil {
		f := AsFailure(err, reason.SnapshotFailed)
		rep = Report{Reason: f.Reason, Message: f.Err.Error(), Corrupt: corrupt}
		code = ExitRetryable
		if f.Permanent {
			code = ExitPermanent
		}
	}
	b, _ := json.Marshal(rep)
	_, _ = fmt.Fprintln(out, string(b))
	if terminationLog != "" {
		// Best effort: the operator also falls back to the log tail (FallbackToLogsOnError).
		_ = os.WriteFile(terminationLog, b, 0o600)
	}
	return code
}

// BackupMain is `worker backup`: snapshot a cluster into S3 or a file, report the result.
func BackupMain(ctx context.Context, args []string, out io.Writer) int {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	var st storageFlags
	st.register(fs)
	endpoints := fs.String("endpoints", "", "comma-separated etcd client URLs")
	tlsDir := fs.String("tls-dir", "", "directory of the client certificate (tls.crt, tls.key, ca.crt); empty: plain text")
	serverName := fs.String("server-name", "", "name the etcd server certificates are verified against")
	termLog := fs.String("termination-log", "/dev/termination-log", "where the result is written for the operator")
	if err := fs.Parse(args); err != nil {
		return ExitPermanent
	}
	if err := st.validate(); err != nil || *endpoints == "" {
		return finish(out, *termLog, nil, fail(reason.SnapshotFailed, true, "bad arguments: %v (endpoints %q)", err, *endpoints))
	}
	tlsConfig, err := loadTLS(*tlsDir, *serverName)
	if err != nil {
		return finish(out, *termLog, nil, fail(reason.ClusterUnavailable, false, "%w", err))
	}
	debug.SetMemoryLimit(memoryLimit)
	peak := watchMemory()
	start := time.Now()
	res, err := Take(ctx, strings.Split(*endpoints, ","), tlsConfig, st.store())
	if err != nil {
		return finish(out, *termLog, nil, err)
	}
	res.Seconds = time.Since(start).Seconds()
	res.PeakAnonBytes, res.PeakRSSBytes = peak()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		res.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return finish(out, *termLog, &res, nil)
}

// RestoreMain is `worker restore`, run in an init container of the cluster's own etcd image
// (the binary is copied there by CopySelfMain): fetch and verify the snapshot, then restore it
// with that image's etcdutl. It does nothing when the data directory already holds a member.
// With pit (nil: none), its flags may name an archive chain and a target: the snapshot is then
// replayed to the target before the restore (restorePointInTime).
func RestoreMain(ctx context.Context, args []string, out io.Writer, pit PointInTime) int {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var st storageFlags
	st.register(fs)
	var cfg RestoreConfig
	var want Expect
	fs.StringVar(&want.SHA256, "sha256", "", "expected SHA-256 of the snapshot (hex); empty: the manifest's beside it, if any")
	fs.Int64Var(&want.Size, "size", 0, "expected size of the snapshot; 0: not checked")
	fs.StringVar(&cfg.Etcdutl, "etcdutl", "/usr/local/bin/etcdutl", "etcdutl of the cluster's etcd version")
	fs.StringVar(&cfg.Snapshot, "snapshot", "", "local path for the downloaded snapshot (on the data volume)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "the member's data directory")
	fs.StringVar(&cfg.Name, "name", "", "member name")
	fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "initial cluster")
	fs.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", "", "initial cluster token")
	fs.StringVar(&cfg.InitialAdvertisePeerURLs, "initial-advertise-peer-urls", "", "this member's peer URL")
	fs.Int64Var(&cfg.BumpRevision, "bump-revision", 0, "raise the revision by this much and mark it compacted (a point-in-time restore)")
	termLog := fs.String("termination-log", "/dev/termination-log", "where the result is written for the operator")
	if pit != nil {
		pit.Register(fs)
	}
	if err := fs.Parse(args); err != nil {
		return ExitPermanent
	}
	err := st.validateWith(pit)
	if err != nil || cfg.Snapshot == "" || cfg.DataDir == "" || cfg.Name == "" {
		return finish(out, *termLog, nil, fail(reason.RestoreFailed, true, "bad arguments: %v", err))
	}
	if Restored(cfg.DataDir) {
		_, _ = fmt.Fprintf(out, "%s already holds a member; nothing to restore\n", cfg.DataDir)
		return ExitOK
	}
	if pit != nil && pit.Requested() {
		return restorePointInTime(ctx, &st, cfg, want, pit, out, *termLog)
	}
	start := time.Now()
	if _, err := fetchChecked(ctx, st.store(), cfg.Snapshot, want); err != nil {
		return finish(out, *termLog, nil, err)
	}
	fetched := time.Now()
	if err := Restore(ctx, cfg); err != nil {
		return finish(out, *termLog, nil, err)
	}
	_, _ = fmt.Fprintf(out, "restored %s into %s (download %.2fs, etcdutl %.2fs)\n", cfg.Name, cfg.DataDir,
		fetched.Sub(start).Seconds(), time.Since(fetched).Seconds())
	return ExitOK
}

// DeleteMain is `worker delete`: remove a stored snapshot (retention). A missing one is fine.
func DeleteMain(ctx context.Context, args []string, out io.Writer) int {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	var st storageFlags
	st.register(fs)
	termLog := fs.String("termination-log", "/dev/termination-log", "where the result is written for the operator")
	if err := fs.Parse(args); err != nil {
		return ExitPermanent
	}
	if err := st.validate(); err != nil {
		return finish(out, *termLog, nil, fail(reason.DeleteFailed, true, "bad arguments: %w", err))
	}
	if err := st.store().Delete(ctx); err != nil {
		return finish(out, *termLog, nil, AsFailure(err, reason.DeleteFailed))
	}
	// The manifest after the snapshot: a manifest left alone by a failure in between vouches for
	// nothing (no restore can name a deleted snapshot), and the retry deletes it.
	if m, ok := manifestStore(st.store()); ok {
		if err := m.Delete(ctx); err != nil {
			return finish(out, *termLog, nil, AsFailure(err, reason.DeleteFailed))
		}
	}
	_, _ = fmt.Fprintln(out, "deleted")
	return ExitOK
}

// VerifyMain is `worker verify`: the schedule's test-restore Job, run in the backup's etcd image
// (like `worker restore`, the binary is copied there by CopySelfMain). With pit (nil: none), its
// flags may name the archive chain that continues the snapshot: after the test-restore, the chain
// is replayed onto the snapshot to its end, so every segment's SHA-256 and link is checked and the
// point-in-time restore is proven end to end.
func VerifyMain(ctx context.Context, args []string, out io.Writer, pit PointInTime) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	var st storageFlags
	st.register(fs)
	var want Expect
	var cfg VerifyConfig
	fs.StringVar(&want.SHA256, "sha256", "", "recorded SHA-256 of the snapshot")
	fs.Int64Var(&want.Size, "size", 0, "recorded size of the snapshot")
	fs.Int64Var(&cfg.Revision, "revision", 0, "recorded revision: the restored etcd must be at it or later")
	fs.StringVar(&cfg.Etcdutl, "etcdutl", "/usr/local/bin/etcdutl", "etcdutl of the backup's version")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "scratch directory for the snapshot and the restored data")
	termLog := fs.String("termination-log", "/dev/termination-log", "where the result is written for the operator")
	var rechecks []Recheck
	fs.Func("recheck", "another backup's snapshot in the same store whose bytes are checked again (backup:sha256:size:key); repeatable", func(v string) error {
		r, err := ParseRecheck(v)
		rechecks = append(rechecks, r)
		return err
	})
	fs.StringVar(&cfg.Etcd, "etcd", "/usr/local/bin/etcd", "etcd of the backup's version")
	if pit != nil {
		pit.Register(fs)
	}
	if err := fs.Parse(args); err != nil {
		return ExitPermanent
	}
	err := st.validateWith(pit)
	if err != nil || cfg.WorkDir == "" || want.SHA256 == "" {
		return finish(out, *termLog, nil, fail(reason.VerifyFailed, true, "bad arguments: %v", err))
	}
	if pit != nil && pit.Requested() {
		cfg.Chain = pit
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return finish(out, *termLog, nil, fail(reason.VerifyFailed, false, "create %s: %w", cfg.WorkDir, err))
	}
	corrupt := recheckAll(ctx, rechecks, func(key string) Source { return st.at(key) }, cfg.WorkDir)
	res, err := Verify(ctx, st.store(), want, cfg)
	if err != nil {
		return finishWith(out, *termLog, nil, err, corrupt)
	}
	return finishWith(out, *termLog, &res, nil, corrupt)
}

// CopySelfMain is `worker copy-self DEST`: puts this static binary on a shared volume, so a
// container of another image (the etcd image, which has no shell) can run `worker restore`.
func CopySelfMain(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: worker copy-self DEST")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	tmp := args[0] + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755) //nolint:gosec // an executable by design
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return fmt.Errorf("copy %s: %w", self, err)
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, args[0])
}
