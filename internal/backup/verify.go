package backup

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// VerifyConfig is a test-restore: the snapshot is fetched (size and SHA-256 checked against the
// record and the manifest beside it), restored with etcdutl and served by a throwaway single-member
// etcd on loopback, which must answer at the recorded revision or later and, where the manifest
// has the source's keyspace hash, hash its keyspace the same.
type VerifyConfig struct {
	Etcd, Etcdutl string
	// WorkDir holds the snapshot and the data directory; removed afterwards.
	WorkDir  string
	Revision int64
	// Chain, when set, is the archive that continues the snapshot: it is replayed onto the
	// snapshot to its end after the test-restore (every segment's SHA-256 and link checked).
	Chain PointInTime
}

// Verify runs the test-restore of src and returns what the restored etcd reported.
func Verify(ctx context.Context, src Source, want Expect, cfg VerifyConfig) (Result, error) {
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return Result{}, fail(reason.VerifyFailed, false, "create %s: %w", cfg.WorkDir, err)
	}
	defer func() { _ = os.RemoveAll(cfg.WorkDir) }()
	snap := filepath.Join(cfg.WorkDir, "snapshot.db")
	manifest, err := fetchChecked(ctx, src, snap, want)
	if err != nil {
		return Result{}, err
	}
	// The restore consumes the snapshot; the chain's replay reads a second name of the same file.
	chainSnap := filepath.Join(cfg.WorkDir, "chain-snapshot.db")
	if cfg.Chain != nil {
		if err := os.Link(snap, chainSnap); err != nil {
			return Result{}, fail(reason.VerifyFailed, false, "keep the snapshot for the chain's replay: %w", err)
		}
	}
	peer, client := freeLoopbackURL(), freeLoopbackURL()
	data := filepath.Join(cfg.WorkDir, "data")
	if err := Restore(ctx, RestoreConfig{Etcdutl: cfg.Etcdutl, Snapshot: snap, DataDir: data, Name: "verify",
		InitialCluster: "verify=" + peer, InitialClusterToken: "verify", InitialAdvertisePeerURLs: peer}); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	etcd := exec.CommandContext(ctx, cfg.Etcd, "--name=verify", "--data-dir="+data,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=verify="+peer,
		"--listen-client-urls="+client, "--advertise-client-urls="+client, "--log-level=error")
	etcd.Stdout, etcd.Stderr = os.Stderr, os.Stderr
	if err := etcd.Start(); err != nil {
		return Result{}, fail(reason.VerifyFailed, false, "start etcd: %w", err)
	}
	defer func() { _ = etcd.Process.Kill(); _ = etcd.Wait() }()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return Result{}, fail(reason.VerifyFailed, false, "dial the restored etcd: %w", err)
	}
	defer func() { _ = cl.Close() }()
	for {
		// A full count reads every key: a snapshot that restores but cannot serve fails here.
		resp, err := cl.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
		if err == nil {
			st, serr := cl.Status(ctx, client)
			if serr != nil {
				return Result{}, fail(reason.VerifyFailed, false, "status of the restored etcd: %w", serr)
			}
			if resp.Header.Revision < cfg.Revision {
				return Result{}, fail(reason.VerifyFailed, true, "restored revision %d is older than the recorded %d", resp.Header.Revision, cfg.Revision)
			}
			res := Result{EtcdVersion: st.Version, Revision: resp.Header.Revision, Size: want.Size, SHA256: want.SHA256}
			if manifest != nil {
				res.Size, res.SHA256 = manifest.Size, manifest.SHA256
				if res.KeyspaceVerified, err = checkKeyspace(ctx, cl, client, manifest.Keyspace); err != nil {
					return Result{}, err
				}
			}
			if cfg.Chain != nil {
				pit, err := cfg.Chain.Replay(ctx, ReplayInput{Snapshot: chainSnap,
					WorkDir: filepath.Join(cfg.WorkDir, "replay"), Output: filepath.Join(cfg.WorkDir, "replayed.db")})
				if err != nil {
					return Result{}, AsFailure(err, reason.VerifyFailed)
				}
				res.Chain = &pit
			}
			return res, nil
		}
		select {
		case <-ctx.Done():
			return Result{}, fail(reason.VerifyFailed, false, "the restored etcd does not serve: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// checkKeyspace compares the restored store's hash at the manifest's revision with the source's,
// when both were computed after the same compaction (otherwise equal data hash differently, and
// nothing is concluded: the snapshot stays verified by its bytes only). It says whether it compared.
func checkKeyspace(ctx context.Context, cl *clientv3.Client, endpoint string, want *KeyspaceHash) (bool, error) {
	if want == nil {
		return false, nil
	}
	resp, err := cl.HashKV(ctx, endpoint, want.Revision)
	if err != nil {
		return false, fail(reason.VerifyFailed, false, "hash the restored keyspace at revision %d: %w", want.Revision, err)
	}
	got := KeyspaceHash{Hash: resp.Hash, Revision: resp.HashRevision, CompactRevision: resp.CompactRevision}
	if !want.Comparable(got) {
		return false, nil
	}
	if got.Hash != want.Hash {
		return false, fail(reason.KeyspaceHashMismatch, true, "the restored keyspace hashes to %d at revision %d (compacted at %d); its source member reported %d",
			got.Hash, got.Revision, got.CompactRevision, want.Hash)
	}
	return true, nil
}

func freeLoopbackURL() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "http://127.0.0.1:0"
	}
	defer func() { _ = l.Close() }()
	return "http://" + l.Addr().String()
}
