// Package etcdclient is the operator's only etcd client: dialing with TLS and timeouts, membership,
// member status and leadership. Everything that talks to etcd goes through here.
package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
)

const (
	dialTimeout = 5 * time.Second
	// callTimeout bounds every call, so a partitioned member can never stall a reconcile.
	callTimeout = 5 * time.Second
	// memberTimeout bounds asking one member about itself, its status or its metrics. etcd answers
	// both from its own state (no raft round), in milliseconds; a member that has not answered within
	// it is stopping, not yet serving or cut off, and waiting longer on it only delays the pass that
	// must act on it.
	memberTimeout = 2 * time.Second
)

// endpointKey carries the endpoint a call is for, so a call that never connected is still named.
type endpointKey struct{}

// Member is one entry of the member list.
type Member struct {
	ID         uint64
	Name       string // empty until the member has started
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// Started says whether the member has ever run (an added but unstarted member has no name).
func (m Member) Started() bool { return m.Name != "" }

// Status is what one member reports of itself.
type Status struct {
	ID uint64
	// ClusterID is the ID of the cluster the member belongs to.
	ClusterID   uint64
	Leader      uint64
	Version     string
	DBSize      int64
	DBSizeInUse int64
	RaftIndex   uint64
	// RaftAppliedIndex is the last raft entry this member applied (its snapshots follow it).
	RaftAppliedIndex uint64
	RaftTerm         uint64
	// Revision is the member's current key-value revision.
	Revision  int64
	IsLearner bool
	// Errors are the member's own problems (e.g. it has no leader).
	Errors []string
	// Alarms raised anywhere in the cluster (every member reports all of them), as etcd prints them;
	// Client.Alarms says which member raised which.
	Alarms []string
	// StorageVersion is the schema version of the member's data ("3.5.0"); etcd 3.6+ only.
	StorageVersion string
	// DowngradeTarget is the version a downgrade is enabled to, empty when none is.
	DowngradeTarget string
}

// Client talks to one etcd cluster.
type Client struct {
	c   *clientv3.Client
	tls *tls.Config
	// guard is shared with the one-member clients made from this one (alone).
	guard *clusterGuard
}

// ErrWrongCluster is an answer that comes from another etcd cluster than the one expected
// (ExpectCluster): an address of a member reused by another cluster's pod, say. It is never acted on.
var ErrWrongCluster = errors.New("answered by another etcd cluster")

// WrongClusterError is one answer refused with ErrWrongCluster.
type WrongClusterError struct {
	// At is the address that answered (the endpoint, or host:port when the call was not pinned to one).
	At              string
	Want, Got       uint64
	AnsweringMember uint64
}

func (e *WrongClusterError) Error() string {
	return fmt.Sprintf("%s answered as member %x of cluster %x, not of cluster %x", e.At, e.AnsweringMember, e.Got, e.Want)
}

func (e *WrongClusterError) Unwrap() error { return ErrWrongCluster }

// clusterGuard checks the cluster ID in the header of every answer against the expected one, and
// remembers the addresses that answered for another cluster until the endpoints are set again.
type clusterGuard struct {
	want    atomic.Uint64
	mu      sync.Mutex
	refused map[string]bool // endpoint URLs and host:port addresses
}

func (g *clusterGuard) check(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var to peer.Peer
	if err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&to))...); err != nil {
		return err
	}
	want := g.want.Load()
	r, ok := reply.(interface {
		GetHeader() *etcdserverpb.ResponseHeader
	})
	if want == 0 || !ok || r.GetHeader() == nil || r.GetHeader().ClusterId == want {
		return nil
	}
	h := r.GetHeader()
	wrong := &WrongClusterError{Want: want, Got: h.ClusterId, AnsweringMember: h.MemberId}
	g.mu.Lock()
	defer g.mu.Unlock()
	if to.Addr != nil {
		wrong.At = to.Addr.String()
		g.refused[wrong.At] = true
	}
	if ep, _ := ctx.Value(endpointKey{}).(string); ep != "" {
		wrong.At = ep
		g.refused[ep] = true
	}
	return wrong
}

// ExpectCluster makes every call refuse an answer whose header names another cluster than id
// (ErrWrongCluster); 0 checks nothing (a cluster whose ID is not known yet).
func (c *Client) ExpectCluster(id uint64) { c.guard.want.Store(id) }

// DropRefused removes from the endpoints those that answered for another cluster (ExpectCluster),
// so that no call of this client reaches them until the endpoints are set again, and returns them.
// Call it after asking every member (Status) and before acting.
func (c *Client) DropRefused() []string {
	c.guard.mu.Lock()
	defer c.guard.mu.Unlock()
	var keep, dropped []string
	for _, ep := range c.c.Endpoints() {
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			host = u.Host
		}
		if c.guard.refused[ep] || c.guard.refused[host] {
			dropped = append(dropped, ep)
		} else {
			keep = append(keep, ep)
		}
	}
	if len(dropped) > 0 {
		c.c.SetEndpoints(keep...)
	}
	return dropped
}

// readBufferSize is the read buffer of each connection of a client from New. The operator holds
// one such client per cluster for as long as it runs, and its replies are small (member lists,
// statuses, hashes), so gRPC's default of 32 KiB, kept per connection, was half of a connected
// client's heap (TestClientMemoryPerCluster: 63 KiB → 34 KiB with TLS); snapshot clients keep the
// default.
const readBufferSize = 4 << 10

// New dials endpoints (client URLs). tlsConfig is nil for plain-text clusters.
func New(endpoints []string, tlsConfig *tls.Config) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no etcd endpoints to dial")
	}
	return newClient(endpoints, tlsConfig, &clusterGuard{refused: map[string]bool{}}, grpc.WithReadBufferSize(readBufferSize))
}

// snapshotWindow is the fixed gRPC flow-control window of a snapshot client. gRPC's default grows
// the window with its bandwidth estimate up to 16 MiB, and a snapshot stream read more slowly
// than etcd sends it (the upload is the slower side) then holds that much unread in memory; a
// fixed window bounds it and still keeps a loopback or pod network busy.
const snapshotWindow = 1 << 20

// NewForSnapshot dials one member for a snapshot stream, with the fixed window snapshotWindow and
// buffers that are not cleared (uncleared).
func NewForSnapshot(endpoint string, tlsConfig *tls.Config) (*Client, error) {
	return newClient([]string{endpoint}, tlsConfig, &clusterGuard{refused: map[string]bool{}},
		grpc.WithInitialWindowSize(snapshotWindow), grpc.WithInitialConnWindowSize(snapshotWindow),
		experimental.WithBufferPool(&uncleared{}))
}

func newClient(endpoints []string, tlsConfig *tls.Config, guard *clusterGuard, opts ...grpc.DialOption) (*Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tlsConfig,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		DialOptions:          append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(observeRPC, guard.check)}, opts...),
		// Not RejectOldCluster: its version probe fails the whole dial when any one endpoint is down,
		// which is exactly when the operator must act.
	})
	if err != nil {
		return nil, fmt.Errorf("dial etcd %v: %w", endpoints, err)
	}
	return &Client{c: c, tls: tlsConfig, guard: guard}, nil
}

// SetEndpoints replaces the endpoints (member pods come and go) without dialing anew. Addresses
// refused before (DropRefused) are asked again: a pod of this cluster may hold one now.
func (c *Client) SetEndpoints(endpoints ...string) {
	c.guard.mu.Lock()
	c.guard.refused = map[string]bool{}
	c.guard.mu.Unlock()
	c.c.SetEndpoints(endpoints...)
}

// Close releases the connections.
func (c *Client) Close() error { return c.c.Close() }

// Raw exposes the clientv3 client for key-value access (tests, backups).
func (c *Client) Raw() *clientv3.Client { return c.c }

// RPCDuration is the latency of calls to etcd by RPC and gRPC code. It lives here, not in
// internal/metrics, so the worker binary (backups, restores), which links this package, stays free of
// the Kubernetes libraries; internal/metrics registers it with the operator's registry.
var RPCDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: "etcd_autopilot", Name: "etcd_rpc_duration_seconds", Help: "Latency of the operator's calls to etcd, by RPC and gRPC code.",
	Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
}, []string{"rpc", "code"})

// observeRPC times every unary call to etcd, so the latency the operator sees per RPC is exported
// without timing code in each method.
func observeRPC(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	var to peer.Peer // the member that answered (or was asked last), for the call trace
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&to))...)
	took, rpc := time.Since(start), strings.TrimPrefix(method, "/etcdserverpb.")
	RPCDuration.WithLabelValues(rpc, status.Code(err).String()).Observe(took.Seconds())
	call := rpc
	if to.Addr != nil {
		call += " at " + to.Addr.String()
	} else if ep, _ := ctx.Value(endpointKey{}).(string); ep != "" {
		call += " at " + ep // never connected: the member asked
	}
	traceCall(ctx, call, took)
	return err
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

// MemberList returns the members and the cluster ID, linearizably.
func (c *Client) MemberList(ctx context.Context) ([]Member, uint64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := c.c.MemberList(ctx) // linearizable by default
	if err != nil {
		return nil, 0, fmt.Errorf("member list: %w", err)
	}
	return members(resp), resp.Header.ClusterId, nil
}

// LocalMemberList is the membership as the member at endpoint knows it, without asking the leader:
// it answers even when the cluster has lost quorum.
func (c *Client) LocalMemberList(ctx context.Context, endpoint string) ([]Member, error) {
	one, err := c.alone(endpoint)
	if err != nil {
		return nil, err
	}
	defer func() { _ = one.Close() }()
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := one.c.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("local member list of %s: %w", endpoint, err)
	}
	return members(resp), nil
}

// alone is a client of the member at endpoint only (same TLS), for calls whose answer depends on
// which member gives it; the caller closes it.
func (c *Client) alone(endpoint string) (*Client, error) {
	return newClient([]string{endpoint}, c.tls, c.guard)
}

func members(resp *clientv3.MemberListResponse) []Member {
	out := make([]Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		out = append(out, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return out
}

// AddLearner adds a non-voting member with peerURL.
func (c *Client) AddLearner(ctx context.Context, peerURL string) (Member, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := c.c.MemberAddAsLearner(ctx, []string{peerURL})
	if unsettled(err) {
		err = c.atEachMember(err, func(one *clientv3.Client) (aerr error) {
			resp, aerr = one.MemberAddAsLearner(ctx, []string{peerURL})
			return aerr
		})
	}
	if unsettled(err) {
		return Member{}, fmt.Errorf("add learner %s: %w", peerURL, ErrPeersNotSettled)
	}
	if err != nil {
		return Member{}, fmt.Errorf("add learner %s: %w", peerURL, err)
	}
	m := resp.Member
	return Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, IsLearner: true}, nil
}

// unsettled says whether etcd refused a membership change by its strict reconfiguration check.
func unsettled(err error) bool {
	return err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCUnhealthy)
}

// atEachMember makes a membership call of each member alone (call, with a client of that member
// only) until one does not refuse it by etcd's strict reconfiguration check; refused is the refusal
// the spread client got. etcd checks a member addition or removal against the peer connections of
// the member that receives it, and one member's view can stay stale for good: it marks a peer
// inactive when a message to that peer's old address fails after its new connection came up, and
// only a reconnection marks it active again. A client that spreads calls round-robin can keep landing
// on that member (the same number of calls each pass), so the change would be refused forever while
// another member would take it at once. Only refusals move on to the next member: any other error
// may mean the change was proposed.
func (c *Client) atEachMember(refused error, call func(one *clientv3.Client) error) error {
	err := refused
	for _, ep := range c.c.Endpoints() {
		one, derr := c.alone(ep)
		if derr != nil {
			return derr
		}
		err = call(one.c)
		_ = one.Close()
		if !unsettled(err) {
			return err
		}
	}
	return err
}

// ErrPeersNotSettled means etcd's strict reconfiguration check refused a member addition because the
// member asked has not been connected to every voting peer for etcd's health interval (5 s): right
// after a member restarted or joined. It clears by itself; retry later.
var ErrPeersNotSettled = errors.New("etcd refuses a member addition until every voting member has been connected for 5 s")

// ErrLearnerNotReady means the learner has not caught up with the leader yet; retry later.
var ErrLearnerNotReady = errors.New("learner not yet in sync with the leader")

// Promote makes a caught-up learner a voting member.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := c.c.MemberPromote(ctx, id); err != nil {
		if rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCLearnerNotReady) {
			return fmt.Errorf("promote member %x: %w", id, ErrLearnerNotReady)
		}
		return fmt.Errorf("promote member %x: %w", id, err)
	}
	return nil
}

// Remove removes a member. Callers check the member list first: with strict reconfiguration
// checks, etcd answers a remove of an absent member with "unhealthy cluster", not "not found".
func (c *Client) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := c.c.MemberRemove(ctx, id)
	if unsettled(err) {
		err = c.atEachMember(err, func(one *clientv3.Client) error {
			_, rerr := one.MemberRemove(ctx, id)
			return rerr
		})
	}
	if err != nil {
		return fmt.Errorf("remove member %x: %w", id, err)
	}
	return nil
}

// RemoveAt asks the member at endpoint alone to remove member id. Callers never ask the member
// removed: a member asked to remove itself applies the change and stops, and about half the time its
// answer is lost with it ("server stopped": 3 of 6 on embedded etcd), so the removal is made while
// the caller is told it failed. Refused says whether the member refused it under etcd's strict
// reconfiguration check, when another member may take it.
func (c *Client) RemoveAt(ctx context.Context, endpoint string, id uint64) error {
	return c.checkedAt(ctx, endpoint, fmt.Sprintf("remove member %x", id), callTimeout, func(ctx context.Context, one *clientv3.Client) error {
		_, err := one.MemberRemove(ctx, id)
		return err
	})
}

// checkedAt makes call (named what in its errors) with a client of the member at endpoint alone,
// within timeout, after asking that member its status: a call that must reach one member is never
// sent to a member of another cluster (ExpectCluster).
func (c *Client) checkedAt(ctx context.Context, endpoint, what string, timeout time.Duration, call func(context.Context, *clientv3.Client) error) error {
	one, err := c.alone(endpoint)
	if err != nil {
		return err
	}
	defer func() { _ = one.Close() }()
	if _, err := one.Status(ctx, endpoint); err != nil {
		return fmt.Errorf("%s via %s: %w", what, endpoint, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := call(ctx, one.c); err != nil {
		return fmt.Errorf("%s via %s: %w", what, endpoint, err)
	}
	return nil
}

// Refused says whether err is etcd's strict reconfiguration check refusing a membership change
// (the member asked holds a peer inactive): nothing was proposed, and another member may accept it.
func Refused(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if unsettled(err) {
			return true
		}
	}
	return false
}

// UpdatePeerURLs replaces the peer URLs of member id: the others dial it at them from then on (in
// TLS for an https URL). The member must already listen there; updating to the same URLs is a no-op.
func (c *Client) UpdatePeerURLs(ctx context.Context, id uint64, peerURLs ...string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := c.c.MemberUpdate(ctx, id, peerURLs); err != nil {
		return fmt.Errorf("update peer URLs of member %x to %v: %w", id, peerURLs, err)
	}
	return nil
}

// Status asks the member at endpoint about itself.
func (c *Client) Status(ctx context.Context, endpoint string) (Status, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, endpointKey{}, endpoint), memberTimeout)
	defer cancel()
	resp, err := c.c.Status(ctx, endpoint)
	if err != nil {
		return Status{}, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	st := Status{
		ID: resp.Header.MemberId, ClusterID: resp.Header.ClusterId, Leader: resp.Leader, Version: resp.Version,
		DBSize: resp.DbSize, DBSizeInUse: resp.DbSizeInUse, RaftIndex: resp.RaftIndex,
		RaftAppliedIndex: resp.RaftAppliedIndex, RaftTerm: resp.RaftTerm, Revision: resp.Header.Revision, IsLearner: resp.IsLearner,
		StorageVersion: resp.StorageVersion,
	}
	for _, e := range resp.Errors {
		// etcd appends each raised alarm (AlarmMember's text form, "memberID:… alarm:NOSPACE").
		if strings.Contains(e, "alarm:") {
			st.Alarms = append(st.Alarms, e)
		} else {
			st.Errors = append(st.Errors, e)
		}
	}
	if d := resp.DowngradeInfo; d != nil && d.Enabled {
		st.DowngradeTarget = d.TargetVersion
	}
	return st, nil
}

// EnableDowngrade asks etcd to validate, then enable, a downgrade of the cluster to target
// ("3.5.0"). From then on the cluster version is target and every member migrates its storage
// to it; members may then be restarted at the older version.
func (c *Client) EnableDowngrade(ctx context.Context, target string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := c.c.Downgrade(ctx, clientv3.DowngradeValidate, target); err != nil {
		return fmt.Errorf("validate downgrade to %s: %w", target, err)
	}
	if _, err := c.c.Downgrade(ctx, clientv3.DowngradeEnable, target); err != nil {
		return fmt.Errorf("enable downgrade to %s: %w", target, err)
	}
	return nil
}

// CancelDowngrade turns off an enabled downgrade; the cluster version goes back up as members
// report the newer version. Cancelling when none is enabled is not an error.
func (c *Client) CancelDowngrade(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := c.c.Downgrade(ctx, clientv3.DowngradeCancel, ""); err != nil && rpctypes.ErrorDesc(err) != rpctypes.ErrorDesc(rpctypes.ErrGRPCNoInflightDowngrade) {
		return fmt.Errorf("cancel downgrade: %w", err)
	}
	return nil
}

// Alarm types, as etcd names them.
const (
	// AlarmNoSpace: the database reached its quota; writes are refused cluster-wide.
	AlarmNoSpace = "NOSPACE"
	// AlarmCorrupt: the member's data differs from the others'.
	AlarmCorrupt = "CORRUPT"
)

// Alarm is one raised alarm on one member.
type Alarm struct {
	MemberID uint64
	Type     string
}

// Alarms lists the raised alarms.
func (c *Client) Alarms(ctx context.Context) ([]Alarm, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := c.c.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list alarms: %w", err)
	}
	out := make([]Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		out = append(out, Alarm{MemberID: a.MemberID, Type: a.Alarm.String()})
	}
	return out, nil
}

// Compact discards the key history before rev and waits until the backend has dropped it, so that
// the pages it used are free when the call returns. A revision already compacted is not an error.
func (c *Client) Compact(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, defragTimeout)
	defer cancel()
	_, err := c.c.Compact(ctx, rev, clientv3.WithCompactPhysical())
	if err != nil && rpctypes.ErrorDesc(err) != rpctypes.ErrorDesc(rpctypes.ErrGRPCCompacted) {
		return fmt.Errorf("compact at revision %d: %w", rev, err)
	}
	return nil
}

// defragTimeout bounds a compaction or a defragmentation: they copy the whole database, which
// takes seconds per GiB.
const defragTimeout = 5 * time.Minute

// Defragment rewrites the database of the member at endpoint without its free pages, returning
// them to the file system. The member serves nothing meanwhile.
func (c *Client) Defragment(ctx context.Context, endpoint string) error {
	// Asked first, so that no member of another cluster is defragmented (ExpectCluster).
	if _, err := c.Status(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, endpointKey{}, endpoint), defragTimeout)
	defer cancel()
	if _, err := c.c.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}

// Disarm clears every raised alarm of type typ (e.g. AlarmNoSpace). etcd raises it again at once
// if its cause is still there.
func (c *Client) Disarm(ctx context.Context, typ string) error {
	return c.disarmWhere(ctx, func(a Alarm) bool { return a.Type == typ })
}

// DisarmMemberAlarms clears every alarm raised on the member with id. etcd keeps a removed member's
// alarms (a CORRUPT one keeps the whole cluster refusing requests) until they are disarmed.
func (c *Client) DisarmMemberAlarms(ctx context.Context, id uint64) error {
	return c.disarmWhere(ctx, func(a Alarm) bool { return a.MemberID == id })
}

// disarmWhere clears the raised alarms that match.
func (c *Client) disarmWhere(ctx context.Context, match func(Alarm) bool) error {
	alarms, err := c.Alarms(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	for _, a := range alarms {
		if !match(a) {
			continue
		}
		m := &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: etcdserverpb.AlarmType(etcdserverpb.AlarmType_value[a.Type])}
		if _, err := c.c.AlarmDisarm(ctx, m); err != nil {
			return fmt.Errorf("disarm %s on %x: %w", a.Type, a.MemberID, err)
		}
	}
	return nil
}

// AdvanceLog appends at least entries raft entries without touching the keyspace (lease grants
// and revokes, two entries per lease), so that every member takes a snapshot past the current
// index: etcd has no API to ask for one, it snapshots every --snapshot-count applied entries.
func (c *Client) AdvanceLog(ctx context.Context, entries int) error {
	const workers = 8
	leases := (entries + 1) / 2
	errs := make(chan error, workers)
	next := make(chan struct{})
	go func() {
		defer close(next)
		for i := 0; i < leases; i++ {
			select {
			case next <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		go func() {
			var err error
			for range next {
				if err == nil {
					err = c.grantAndRevoke(ctx)
				}
			}
			errs <- err
		}()
	}
	var first error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("advance the raft log by %d entries: %w", entries, first)
	}
	return ctx.Err()
}

func (c *Client) grantAndRevoke(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	l, err := c.c.Grant(ctx, 60)
	if err != nil {
		return err
	}
	_, err = c.c.Revoke(ctx, l.ID)
	return err
}

// MoveLeader asks the leader, reachable at leaderEndpoint, to hand leadership to transferee.
// etcd accepts this request only on the leader, so it is sent to that endpoint alone.
func (c *Client) MoveLeader(ctx context.Context, leaderEndpoint string, transferee uint64) error {
	return c.checkedAt(ctx, leaderEndpoint, fmt.Sprintf("move leader to %x", transferee), 3*callTimeout, func(ctx context.Context, one *clientv3.Client) error {
		_, err := one.MoveLeader(ctx, transferee)
		return err
	})
}

// TLSConfig authenticates with cert and verifies servers against roots under serverName, whatever
// address is dialed. clientv3 replaces tls.Config.ServerName with the dialed host, and the operator
// dials members by pod IP (it may run outside cluster DNS), which no certificate can name for good;
// so the standard hostname check is replaced by an explicit chain + name check in VerifyConnection.
func TLSConfig(cert tls.Certificate, roots *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		Certificates:       []tls.Certificate{cert},
		MinVersion:         pki.MinTLSVersion,
		CipherSuites:       pki.CipherSuites(),
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection below, which checks chain and name
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("etcd server presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				DNSName: serverName, Roots: roots, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("verify etcd server certificate as %s: %w", serverName, err)
			}
			return nil
		},
	}
}

// TLSConfigByHost is the client TLS for etcd servers that are not the operator's (the members of a
// running cluster being taken over): each is verified under the host name or IP it is dialed at,
// which its certificate names.
func TLSConfigByHost(cert tls.Certificate, roots *x509.CertPool) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      roots,
		MinVersion:   pki.MinTLSVersion,
		CipherSuites: pki.CipherSuites(),
	}
}

// AuthEnabled says whether authentication is on: the operator holds no etcd user, so a cluster it
// takes over must not require one.
func (c *Client) AuthEnabled(ctx context.Context) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := c.c.AuthStatus(ctx)
	if err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCUserEmpty) {
		return true, nil // with auth on, etcd answers even this call only to a user
	}
	if err != nil {
		return false, fmt.Errorf("auth status: %w", err)
	}
	return resp.Enabled, nil
}
