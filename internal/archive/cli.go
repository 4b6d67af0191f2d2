package archive

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
)

// Exit codes of `worker archive`, beside backup's ExitOK, ExitRetryable and ExitPermanent.
const (
	// ExitCompacted: the source compacted revisions the archive lacks; take a full snapshot and
	// run again with --start-revision after it.
	ExitCompacted = 3
	// ExitBrokenChain: verify or replay found the chain broken (a gap, an overlap, a bad segment).
	ExitBrokenChain = 4
)

// destFlags name a chain's destination: an S3 prefix, or a directory on a mounted volume.
type destFlags struct {
	s3                      backup.S3Flags
	s3Prefix, dir, location string
}

func (f *destFlags) register(fs *flag.FlagSet) {
	f.s3.Register(fs)
	fs.StringVar(&f.s3Prefix, "s3-prefix", "", "S3 key prefix of the chain's segments")
	fs.StringVar(&f.dir, "dir", "", "directory of the chain's segments on a mounted volume (instead of S3)")
	fs.StringVar(&f.location, "location", "", "the directory's location for humans, e.g. pvc://claim/path")
}

func (f *destFlags) dest() (Destination, error) {
	if (f.s3.Bucket == "") == (f.dir == "") {
		return nil, errors.New("exactly one of --s3-bucket or --dir is needed")
	}
	if f.dir != "" {
		return &DirDestination{Dir: f.dir, Where: f.location}, nil
	}
	return &S3Destination{S3: *f.s3.S3(f.s3Prefix)}, nil
}

// Main is `worker archive run|verify|replay|prune`.
func Main(ctx context.Context, args []string, out io.Writer) int {
	log := funcr.NewJSON(func(obj string) { _, _ = fmt.Fprintln(os.Stderr, obj) }, funcr.Options{})
	if len(args) == 0 {
		_, _ = fmt.Fprintln(os.Stderr, "usage: worker archive run|verify|replay|prune [flags]")
		return backup.ExitPermanent
	}
	fs := flag.NewFlagSet("archive "+args[0], flag.ContinueOnError)
	var df destFlags
	df.register(fs)
	report := func(v any, err error) int {
		if err != nil {
			_, _ = fmt.Fprintf(os.Stderr, "archive %s: %v\n", args[0], err)
			return exitCode(err)
		}
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintln(out, string(b))
		return backup.ExitOK
	}
	switch args[0] {
	case "run":
		endpoints := fs.String("endpoints", "", "comma-separated etcd client URLs")
		tlsDir := fs.String("tls-dir", "", "directory of the client certificate (tls.crt, tls.key, ca.crt); empty: plain text")
		serverName := fs.String("server-name", "", "name the etcd server certificates are verified against")
		var w Writer
		fs.DurationVar(&w.FlushInterval, "flush-interval", DefaultFlushInterval, "longest an observed revision waits in memory")
		fs.IntVar(&w.MaxSegmentBytes, "max-segment-bytes", DefaultMaxSegmentBytes, "a segment ends at this size")
		fs.DurationVar(&w.MergeAge, "merge-age", DefaultMergeAge, "segments stored longer ago than this are merged into segments of up to --max-segment-bytes (0: never)")
		fs.Int64Var(&w.StartRevision, "start-revision", 0, "first revision of a new chain, or of the chain after a full snapshot (0: the source's next)")
		statusAddr := fs.String("status-address", "", "host:port serving the writer's progress (GET /status, /metrics); empty: none")
		if err := fs.Parse(args[1:]); err != nil {
			return backup.ExitPermanent
		}
		dest, err := df.dest()
		if err == nil && *endpoints == "" {
			err = errors.New("--endpoints is needed")
		}
		if err != nil {
			return report(nil, errPermanent{fmt.Errorf("bad arguments: %w", err)})
		}
		tlsConfig, err := backup.LoadTLS(*tlsDir, *serverName)
		if err != nil {
			return report(nil, err)
		}
		cl, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), TLS: tlsConfig,
			DialTimeout: 5 * time.Second, DialKeepAliveTime: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return report(nil, err)
		}
		defer func() { _ = cl.Close() }()
		// A soft limit of two segments (the one being built and its encoded copy in an upload),
		// one more for the watch's buffers, two and a part for a merge (the merged segment, its
		// encoded copy, the part being read), and the clients.
		debug.SetMemoryLimit(int64(6*w.maxBytes()) + 16<<20)
		w.Client, w.Dest, w.Log = cl, dest, log
		if *statusAddr != "" {
			stop := serveStatus(*statusAddr, &w, log)
			defer stop()
		}
		err = w.Run(ctx)
		if errors.Is(err, context.Canceled) {
			return backup.ExitOK // stopped; the next run resumes from the last durable segment
		}
		return report(nil, err)
	case "verify":
		after := fs.Int64("after", 0, "revision of the full snapshot the chain continues")
		until := fs.Int64("until", 0, "last revision to verify (0: the end of the chain)")
		if err := fs.Parse(args[1:]); err != nil {
			return backup.ExitPermanent
		}
		dest, err := df.dest()
		if err != nil {
			return report(nil, errPermanent{err})
		}
		return report(Verify(ctx, dest, *after, *until))
	case "replay":
		var cfg ReplayConfig
		at := fs.String("target-time", "", "RFC 3339 time: replay the revisions observed at or before it")
		fs.Int64Var(&cfg.TargetRevision, "target-revision", 0, "last revision to replay (0: the end of the chain)")
		fs.StringVar(&cfg.Snapshot, "snapshot", "", "the full snapshot file, fetched and checked (consumed)")
		fs.StringVar(&cfg.Output, "output", "", "where the replayed snapshot is written")
		fs.StringVar(&cfg.WorkDir, "work-dir", "", "scratch directory for the replay's database")
		if err := fs.Parse(args[1:]); err != nil {
			return backup.ExitPermanent
		}
		dest, err := df.dest()
		if err == nil && (cfg.Snapshot == "" || cfg.Output == "" || cfg.WorkDir == "") {
			err = errors.New("--snapshot, --output and --work-dir are needed")
		}
		if err == nil && *at != "" {
			cfg.TargetTime, err = time.Parse(time.RFC3339Nano, *at)
		}
		if err != nil {
			return report(nil, errPermanent{fmt.Errorf("bad arguments: %w", err)})
		}
		cfg.Log = log
		return report(Replay(ctx, dest, cfg))
	case "prune":
		return pruneMain(ctx, fs, &df, args[1:], out)
	}
	_, _ = fmt.Fprintf(os.Stderr, "unknown archive subcommand %q (run, verify, replay, prune)\n", args[0])
	return backup.ExitPermanent
}

// serveStatus serves w's progress on addr until stop is called. A port that cannot be bound is
// logged, not fatal: the archive matters more than its report.
func serveStatus(addr string, w *Writer, log logr.Logger) (stop func()) {
	srv := &http.Server{Addr: addr, Handler: w.StatusHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "the status endpoint does not serve", "address", addr)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}

func exitCode(err error) int {
	var ce *CompactedError
	var chain *ChainError
	var perm errPermanent
	var before *BeforeSnapshotError
	var f *backup.Failure
	switch {
	case errors.As(err, &ce):
		return ExitCompacted
	case errors.As(err, &chain):
		return ExitBrokenChain
	case errors.As(err, &perm), errors.As(err, &before), errors.As(err, &f) && f.Permanent:
		return backup.ExitPermanent
	}
	return backup.ExitRetryable
}
