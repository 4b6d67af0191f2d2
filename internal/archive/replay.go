package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
)

// BumpFor is the --bump-revision for restoring a replay that reached revision restored from a
// chain whose last archived revision is latest: past every revision the old cluster can have
// served, so no revision number repeats with other contents. The margin stands for what the old
// cluster served and the archive never stored.
func BumpFor(latest, restored int64) int64 {
	return max(latest-restored, 0) + backup.DefaultBumpMargin
}

// unknownLeaseTTL is granted to a lease whose TTL the writer could not read (it was revoked
// right after the put): its keys' deletion is in the chain when it happened before the target.
const unknownLeaseTTL = 60

// replayRequestBytes bounds one replayed revision: a lease's expiry deletes all its keys in one
// revision, past etcd's usual request limits.
const replayRequestBytes = 128 << 20

// ReplayConfig is a point-in-time replay: the full snapshot is restored into a scratch etcd on
// loopback (the cluster's own version, like a test-restore), the chain is applied onto it up to
// the target, and the result is written as a new snapshot for the usual restore.
type ReplayConfig struct {
	// Etcd and Etcdutl are the binaries of the cluster's etcd version.
	Etcd, Etcdutl string
	// WorkDir holds the scratch data directory; removed afterwards.
	WorkDir string
	// Snapshot is the full snapshot file, already fetched and checked; consumed (removed) as a
	// restore consumes it.
	Snapshot string
	// TargetRevision is the last revision applied; 0: the end of the chain.
	TargetRevision int64
	// TargetTime, when set, stops before the first revision observed after it.
	TargetTime time.Time
	// Output is where the resulting snapshot is written.
	Output string
	Log    logr.Logger
}

// ReplayResult describes a replay's snapshot.
type ReplayResult struct {
	// SnapshotRevision is the full snapshot's revision; Revision the result's, observed at Time
	// (zero when no revision was applied).
	SnapshotRevision int64     `json:"snapshotRevision"`
	Revision         int64     `json:"revision"`
	Time             time.Time `json:"time,omitzero"`
	Applied          int64     `json:"applied"`
	// Latest is the last revision the archive holds: BumpFor(Latest, Revision) is the restore's bump.
	Latest int64  `json:"latest"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Replay applies the chain at dest onto cfg.Snapshot up to the target, one transaction per
// original revision, each checked to land at its original revision: the result's keyspace is the
// source's at the reached revision, revisions, versions and leases included.
func Replay(ctx context.Context, dest Destination, cfg ReplayConfig) (ReplayResult, error) {
	var res ReplayResult
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return res, fmt.Errorf("create %s: %w", cfg.WorkDir, err)
	}
	data := filepath.Join(cfg.WorkDir, "replay")
	defer func() { _ = os.RemoveAll(data) }()
	peer, client := loopbackURL(), loopbackURL()
	if peer == "" || client == "" {
		return res, errors.New("no free loopback port for the replay's etcd")
	}
	if err := backup.Restore(ctx, backup.RestoreConfig{Etcdutl: cfg.Etcdutl, Snapshot: cfg.Snapshot, DataDir: data, Name: "replay",
		InitialCluster: "replay=" + peer, InitialClusterToken: "replay", InitialAdvertisePeerURLs: peer}); err != nil {
		return res, err
	}
	ectx, stopEtcd := context.WithCancel(ctx)
	defer stopEtcd()
	// The data is scratch until the snapshot at the end, so no fsync: a crash starts over.
	etcd := exec.CommandContext(ectx, cfg.Etcd, "--name=replay", "--data-dir="+data,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=replay="+peer,
		"--listen-client-urls="+client, "--advertise-client-urls="+client, "--log-level=error",
		"--unsafe-no-fsync", "--max-txn-ops=1000000", "--max-request-bytes="+strconv.Itoa(replayRequestBytes),
		"--quota-backend-bytes="+strconv.FormatInt(8<<30, 10))
	etcd.Stdout, etcd.Stderr = os.Stderr, os.Stderr
	if err := etcd.Start(); err != nil {
		return res, fmt.Errorf("start the replay's etcd: %w", err)
	}
	defer func() { stopEtcd(); _ = etcd.Wait() }()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallSendMsgSize: replayRequestBytes + 1<<20})
	if err != nil {
		return res, fmt.Errorf("dial the replay's etcd: %w", err)
	}
	defer func() { _ = cl.Close() }()
	base, err := waitServing(ctx, cl)
	if err != nil {
		return res, err
	}
	res.SnapshotRevision, res.Revision = base, base
	if cfg.TargetRevision > 0 && cfg.TargetRevision < base {
		return res, &BeforeSnapshotError{SnapshotRevision: base, TargetRevision: cfg.TargetRevision}
	}
	if !cfg.TargetTime.IsZero() {
		// Only the chain knows when the snapshot's revision was committed (about): a chain that
		// starts after it cannot tell, and the replay then stops at the snapshot.
		at, ok, err := observedAt(ctx, dest, base)
		if err != nil {
			return res, err
		}
		if ok && at.After(cfg.TargetTime) {
			return res, &BeforeSnapshotError{SnapshotRevision: base, SnapshotTime: at, TargetTime: cfg.TargetTime}
		}
	}
	// Leases tick in the replay's etcd as in any: keep them alive, or one expiring mid-replay
	// would delete keys the chain still holds.
	kctx, stopKeeper := context.WithCancel(ctx)
	keeperDone := make(chan struct{})
	go func() { defer close(keeperDone); keepLeasesAlive(kctx, cl) }()
	defer func() { stopKeeper(); <-keeperDone }()

	leases := pb.NewLeaseClient(cl.ActiveConnection())
	known := map[int64]bool{}
	rep, err := walk(ctx, dest, base, cfg.TargetRevision, func(h Header, rec Record) (bool, error) {
		if !cfg.TargetTime.IsZero() && rec.Time.After(cfg.TargetTime) {
			return false, nil
		}
		ops := make([]clientv3.Op, 0, len(rec.Events))
		for _, ev := range rec.Events {
			if ev.Type == mvccpb.DELETE {
				ops = append(ops, clientv3.OpDelete(string(ev.Kv.Key)))
				continue
			}
			var opts []clientv3.OpOption
			if id := ev.Kv.Lease; id != 0 {
				if !known[id] {
					if err := grantLease(ctx, leases, id, h.Leases[strconv.FormatInt(id, 10)]); err != nil {
						return false, err
					}
					known[id] = true
				}
				opts = append(opts, clientv3.WithLease(clientv3.LeaseID(id)))
			}
			ops = append(ops, clientv3.OpPut(string(ev.Kv.Key), string(ev.Kv.Value), opts...))
		}
		resp, err := cl.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return false, fmt.Errorf("replay revision %d: %w", rec.Revision, err)
		}
		if resp.Header.Revision != rec.Revision {
			return false, &ChainError{Problem: Mismatch, Detail: fmt.Sprintf("revision %d replayed as %d: the chain does not continue this snapshot", rec.Revision, resp.Header.Revision)}
		}
		res.Revision, res.Time = rec.Revision, rec.Time
		res.Applied++
		return true, nil
	})
	if err != nil {
		return res, err
	}
	if cfg.TargetRevision > 0 && res.Revision != cfg.TargetRevision {
		return res, &ChainError{Problem: Short, Detail: fmt.Sprintf("reached revision %d; the target is %d", res.Revision, cfg.TargetRevision)}
	}
	last, err := Latest(ctx, dest)
	if err != nil {
		return res, err
	}
	_, res.Latest, _ = ParseName(last)
	res.Latest = max(res.Latest, rep.Last, res.Revision)
	stopKeeper()
	<-keeperDone
	res.SHA256, res.Size, err = writeSnapshot(ctx, cl, cfg.Output)
	if err != nil {
		return res, err
	}
	cfg.Log.Info("replayed", "snapshot", base, "revision", res.Revision, "applied", res.Applied)
	return res, nil
}

// BeforeSnapshotError is a target before the full snapshot: a replay only goes forward.
type BeforeSnapshotError struct {
	SnapshotRevision int64
	// SnapshotTime is when the archive observed the snapshot's revision (with a TargetTime only).
	SnapshotTime   time.Time
	TargetRevision int64
	TargetTime     time.Time
}

func (e *BeforeSnapshotError) Error() string {
	const need = "the newest full snapshot at or before the target is needed"
	if !e.TargetTime.IsZero() {
		return fmt.Sprintf("the target time %s is before the full snapshot's revision %d (observed at %s): %s",
			e.TargetTime.UTC().Format(time.RFC3339Nano), e.SnapshotRevision, e.SnapshotTime.UTC().Format(time.RFC3339Nano), need)
	}
	return fmt.Sprintf("the target revision %d is before the full snapshot's revision %d: %s", e.TargetRevision, e.SnapshotRevision, need)
}

// observedAt is when the chain observed revision rev; ok is false when no segment holds it. A
// broken chain here is left to the replay's own walk, which reports it where it matters.
func observedAt(ctx context.Context, dest Destination, rev int64) (time.Time, bool, error) {
	var at time.Time
	found := false
	_, err := walk(ctx, dest, rev-1, rev, func(_ Header, r Record) (bool, error) {
		at, found = r.Time, true
		return false, nil
	})
	var ce *ChainError
	if errors.As(err, &ce) {
		return time.Time{}, false, nil
	}
	return at, found, err
}

// waitServing waits for the restored etcd to answer and returns its revision.
func waitServing(ctx context.Context, cl *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		resp, err := cl.Get(ctx, "\x00", clientv3.WithKeysOnly(), clientv3.WithLimit(1))
		if err == nil {
			return resp.Header.Revision, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the replay's etcd does not serve: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// grantLease creates the lease under its original ID, unless the snapshot brought it.
func grantLease(ctx context.Context, leases pb.LeaseClient, id, ttl int64) error {
	if ttl <= 0 {
		ttl = unknownLeaseTTL
	}
	_, err := leases.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl})
	if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
		return fmt.Errorf("grant lease %x: %w", id, err)
	}
	return nil
}

// keepLeasesAlive renews every lease of the replay's etcd twice a second until ctx ends; etcd's
// shortest lease is longer than that.
func keepLeasesAlive(ctx context.Context, cl *clientv3.Client) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := cl.Leases(ctx)
		if err != nil {
			continue
		}
		for _, l := range resp.Leases {
			_, _ = cl.KeepAliveOnce(ctx, l.ID)
		}
	}
}

// writeSnapshot streams the replay's etcd into path and returns its SHA-256 and size.
func writeSnapshot(ctx context.Context, cl *clientv3.Client, path string) (string, int64, error) {
	rc, err := cl.Snapshot(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("snapshot the replay: %w", err)
	}
	defer func() { _ = rc.Close() }()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", 0, fmt.Errorf("create %s: %w", path, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", 0, fmt.Errorf("write the replay's snapshot to %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func loopbackURL() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer func() { _ = l.Close() }()
	return "http://" + l.Addr().String()
}
