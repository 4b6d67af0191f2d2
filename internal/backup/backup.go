// Package backup takes etcd snapshots and moves them between etcd, S3-compatible object storage
// and files on a volume, streamed end to end: memory stays bounded (a backup's S3 parts are read
// straight from the snapshot stream, other uploads buffer one part; files use a copy buffer)
// whatever the database size, and the SHA-256 and size are computed on the way.
// It runs inside the backup and restore Jobs/init containers (`worker backup`, `worker restore`),
// never in the operator process, so a large snapshot cannot block reconciles.
package backup

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Failure is an error with a condition reason; Permanent ones (bad credentials, a missing bucket,
// a tampered snapshot) fail at once instead of being retried.
type Failure struct {
	Reason    reason.Reason
	Permanent bool
	Err       error
}

func (f *Failure) Error() string { return string(f.Reason) + ": " + f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

func fail(why reason.Reason, permanent bool, format string, args ...any) *Failure {
	return &Failure{Reason: why, Permanent: permanent, Err: fmt.Errorf(format, args...)}
}

// AsFailure returns err's Failure, or wraps err as a retryable failure with reason.
func AsFailure(err error, fallback reason.Reason) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	return &Failure{Reason: fallback, Err: err}
}

// Result describes one written snapshot.
type Result struct {
	// Member is the hex ID of the etcd member the snapshot was taken from.
	Member string `json:"member"`
	// ClusterID is the hex ID of the member's cluster: the archive that continues the snapshot.
	ClusterID   string `json:"clusterID,omitempty"`
	EtcdVersion string `json:"etcdVersion"`
	// Revision is the member's revision just before the snapshot: the snapshot holds at least it.
	Revision int64  `json:"revision"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Location string `json:"location"`
	// Keyspace is the source member's keyspace hash at Revision (nil: it could not be computed);
	// Manifest is where the manifest beside the snapshot is ("" when the sink has no place for one).
	Keyspace *KeyspaceHash `json:"keyspace,omitempty"`
	Manifest string        `json:"manifest,omitempty"`
	// KeyspaceVerified, on a test-restore's result, says the restored keyspace's hash equals Keyspace.
	KeyspaceVerified bool `json:"keyspaceVerified,omitempty"`
	// Chain, on a test-restore's result, is what the replay of the archive that continues the
	// snapshot reached (nil: no archive was named).
	Chain *PointInTimeResult `json:"chain,omitempty"`
	// Seconds the whole backup took in the Job (dial, member choice, snapshot and upload), the CPU
	// seconds the process used (user and system), and its peak anonymous and total resident
	// memory: the benchmarks read them from the termination message.
	Seconds       float64 `json:"seconds,omitempty"`
	CPUSeconds    float64 `json:"cpuSeconds,omitempty"`
	PeakAnonBytes int64   `json:"peakAnonBytes,omitempty"`
	PeakRSSBytes  int64   `json:"peakRSSBytes,omitempty"`
}

// Sink receives a snapshot stream. Write must leave nothing readable at the destination unless
// the whole stream was stored (S3 multipart uploads are aborted, files renamed into place last).
type Sink interface {
	// Check fails fast on a destination that cannot work (missing bucket, wrong credentials).
	Check(ctx context.Context) error
	Write(ctx context.Context, r io.Reader) (location string, err error)
}

// hashingReader counts and hashes what passes through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func newHashingReader(r io.Reader) *hashingReader { return &hashingReader{r: r, h: sha256.New()} }

func (hr *hashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	hr.n += int64(n)
	return n, err
}

func (hr *hashingReader) sum() string { return hex.EncodeToString(hr.h.Sum(nil)) }

// Take snapshots the cluster at endpoints (client URLs; tlsConfig nil for plain text) into sink.
// It prefers a healthy follower, so the leader keeps its disk and network for writes.
func Take(ctx context.Context, endpoints []string, tlsConfig *tls.Config, sink Sink) (Result, error) {
	if err := sink.Check(ctx); err != nil {
		return Result{}, err
	}
	cl, err := etcdclient.New(endpoints, tlsConfig)
	if err != nil {
		return Result{}, &Failure{Reason: reason.ClusterUnavailable, Err: err}
	}
	defer func() { _ = cl.Close() }()
	ep, st, err := pickMember(ctx, cl, endpoints)
	if err != nil {
		return Result{}, err
	}
	one, err := etcdclient.NewForSnapshot(ep, tlsConfig)
	if err != nil {
		return Result{}, &Failure{Reason: reason.ClusterUnavailable, Err: err}
	}
	defer func() { _ = one.Close() }()
	// Hashed before the snapshot starts, so the snapshot surely holds st.Revision. A member that
	// cannot hash (an error, a timeout on a huge store) still gets backed up: the manifest then
	// vouches for the bytes only.
	var keyspace *KeyspaceHash
	if h, err := cl.HashKV(ctx, ep, st.Revision); err == nil {
		keyspace = &KeyspaceHash{Hash: h.Hash, Revision: h.HashRevision, CompactRevision: h.CompactRevision}
	}
	// No call timeout: a snapshot takes as long as the database is big; the Job's deadline bounds it.
	rc, err := one.Snapshot(ctx)
	if err != nil {
		return Result{}, fail(reason.SnapshotFailed, false, "snapshot from %s: %w", ep, err)
	}
	defer func() { _ = rc.Close() }()
	sr := NewSnapshotReader(rc, rc.Size())
	loc, err := sink.Write(ctx, sr)
	if err != nil {
		if sr.err != nil { // the snapshot failed, not the sink (which may report it as its own)
			return Result{}, fail(reason.SnapshotFailed, false, "snapshot from %s: %w", ep, sr.err)
		}
		return Result{}, err
	}
	if sr.SHA256() == "" { // a sink that stored without reading to the end
		return Result{}, fail(reason.SnapshotFailed, false, "snapshot from %s: %w: %d of %d bytes stored", ep, ErrSnapshotIncomplete, sr.Size(), sr.Announced())
	}
	res := Result{
		Member: fmt.Sprintf("%x", st.ID), ClusterID: fmt.Sprintf("%x", st.ClusterID), EtcdVersion: st.Version, Revision: st.Revision,
		Size: sr.Size(), SHA256: sr.SHA256(), Location: loc, Keyspace: keyspace,
	}
	// The manifest goes after the snapshot: a manifest never vouches for bytes not yet stored. A
	// crash in between leaves a snapshot without one, which a retry (or the next backup) replaces.
	m := Manifest{Format: ManifestFormat, SHA256: res.SHA256, Size: res.Size, Revision: res.Revision, Member: res.Member,
		ClusterID: res.ClusterID, EtcdVersion: res.EtcdVersion, Keyspace: keyspace}
	if res.Manifest, err = writeManifest(ctx, sink, m); err != nil {
		return Result{}, AsFailure(err, reason.UploadFailed)
	}
	return res, nil
}

// pickMember returns a follower's endpoint, or the leader's when no follower is suitable. A
// member is unsuitable only when it does not answer, knows no leader, is a learner, or has a
// CORRUPT alarm raised on itself. Status reports every alarm of the cluster on every member, so
// its errors are not a verdict on the member: a NOSPACE alarm (the database hit its quota) leaves
// every member able to serve a snapshot, and that is when users need one most.
func pickMember(ctx context.Context, cl *etcdclient.Client, endpoints []string) (string, etcdclient.Status, error) {
	corrupt, err := corruptMembers(ctx, cl)
	if err != nil {
		return "", etcdclient.Status{}, fail(reason.ClusterUnavailable, false, "list alarms: %w", err)
	}
	var leaderEP string
	var leaderSt etcdclient.Status
	var lastErr error
	for _, ep := range endpoints {
		st, err := cl.Status(ctx, ep)
		if err != nil {
			lastErr = err
			continue
		}
		if st.Leader == 0 || st.IsLearner || corrupt[st.ID] {
			lastErr = fmt.Errorf("member %x at %s cannot serve a snapshot: leader=%x learner=%t corrupt=%t", st.ID, ep, st.Leader, st.IsLearner, corrupt[st.ID])
			continue
		}
		if st.ID != st.Leader {
			return ep, st, nil
		}
		leaderEP, leaderSt = ep, st
	}
	if leaderEP != "" {
		return leaderEP, leaderSt, nil
	}
	return "", etcdclient.Status{}, fail(reason.ClusterUnavailable, false, "no member among %v can serve a snapshot: %w", endpoints, lastErr)
}

// corruptMembers are the IDs of the members with a CORRUPT alarm raised on them. The alarm list
// goes through raft: a cluster without quorum cannot answer it, nor be backed up consistently.
func corruptMembers(ctx context.Context, cl *etcdclient.Client) (map[uint64]bool, error) {
	alarms, err := cl.Alarms(ctx)
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, a := range alarms {
		if a.Type == etcdclient.AlarmCorrupt {
			out[a.MemberID] = true
		}
	}
	return out, nil
}
