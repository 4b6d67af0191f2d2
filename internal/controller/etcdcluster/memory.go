package etcdcluster

import (
	"crypto/tls"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
)

// maxObservationGap: when the operator has not seen a cluster's etcd answer for longer than this
// (it was down, partitioned from the cluster, or the whole cluster was), what it knew of failing
// members is stale, and every member gets a fresh grace period before it may be replaced.
const maxObservationGap = 2 * time.Minute

// maxActionBackoff caps the wait before a failed action is tried again.
const maxActionBackoff = 5 * time.Minute

// memory is the operator's in-process state per EtcdCluster: one etcd client reused across passes,
// when etcd last answered, and how often the last actions failed. Losing it (a restart) only costs
// a new client, a fresh grace period and a reset backoff.
type memory struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*clusterMemory
}

type clusterMemory struct {
	uid types.UID
	// client and the identity of what it was built from; rebuilt when the TLS material changes.
	client    *etcdclient.Client
	tlsKey    string
	endpoints []string
	// source is the client of the old members of a cluster being taken over: plain text into client
	// TLS (one client per scheme: clientv3 picks one transport for all of a client's endpoints, and
	// the operator's client certificate never goes to plain-text old members), or TLS verified per
	// host from a cluster with TLS (migrateFrom.caSecret; sourceTLSKey as tlsKey).
	source          *etcdclient.Client
	sourceEndpoints []string
	sourceTLSKey    string
	// lastSight is when etcd last answered a pass.
	lastSight time.Time
	// defragRequest is the value of the defragment annotation being carried out, and
	// defragRequestDone the members defragmented since it was set.
	defragRequest     string
	defragRequestDone map[string]bool
	// disk is the last reading of the members' disk histograms, the baseline of the next slowness
	// window, taken at disk.at; diskReadAt, when they were last read; slowStreaks, how many windows in a row each member was slow; slow, the members slow
	// for long enough to be reported, with the figures (observeSlowness).
	disk        *diskReadings
	diskReadAt  time.Time
	slowStreaks map[uint64]int
	slow        map[uint64]string
	// tuneBase is the last auto-tuning reading, the start of the next window; tuneWindows, the last
	// windows measured, oldest first (observeTuning).
	tuneBase    *tuningReading
	tuneWindows []planner.TuningWindow
	// leaderView is the leader's last read view of its peers (observeFailures).
	leaderView *leaderView
	// failures counts consecutive failed attempts of action, which is not tried again before nextTry.
	failures int
	action   string
	nextTry  time.Time
	// lastError is the error of action's last failed attempt; passFailures and passError count the
	// passes in a row that failed before deciding (an object the pass keeps could not be written).
	lastError    string
	passFailures int
	passError    string
	// dryRun is the API server's verdict on the objects built from one generation of the spec.
	dryRun *dryRunVerdict
}

// failingAfter is how many failed attempts in a row make a step show as Degraded: one failure is
// often a stale view or a passing API error that the next try, a second later, gets past.
const failingAfter = 3

// of returns the memory of the cluster key with UID uid; a re-created namesake starts afresh.
func (m *memory) of(key types.NamespacedName, uid types.UID) *clusterMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clusters == nil {
		m.clusters = map[types.NamespacedName]*clusterMemory{}
	}
	cm := m.clusters[key]
	if cm != nil && cm.uid != uid {
		cm.closeClient()
		cm = nil
	}
	if cm == nil {
		cm = &clusterMemory{uid: uid}
		m.clusters[key] = cm
	}
	return cm
}

// forget drops a deleted cluster's state and closes its client.
func (m *memory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cm := m.clusters[key]; cm != nil {
		cm.closeClient()
		delete(m.clusters, key)
	}
}

// etcd returns the cluster's client for endpoints, dialing only when there is none yet or its TLS
// material changed (tlsKey). Passes of one cluster never run concurrently (controller-runtime
// serialises a key), so the client is not shared between goroutines mid-change.
func (cm *clusterMemory) etcd(endpoints []string, tlsConfig *tls.Config, tlsKey string) (*etcdclient.Client, error) {
	slices.Sort(endpoints)
	if cm.client != nil && cm.tlsKey == tlsKey {
		if !slices.Equal(cm.endpoints, endpoints) {
			cm.client.SetEndpoints(endpoints...)
			cm.endpoints = endpoints
		}
		return cm.client, nil
	}
	if cm.client != nil {
		_ = cm.client.Close()
		cm.client = nil
	}
	cl, err := etcdclient.New(endpoints, tlsConfig)
	if err != nil {
		return nil, err
	}
	cm.client, cm.tlsKey, cm.endpoints = cl, tlsKey, endpoints
	return cl, nil
}

// sourceEtcd returns the client of the old members at endpoints: plain text, or TLS with tlsConfig
// (then redialed when its material changes, tlsKey, as etcd does).
func (cm *clusterMemory) sourceEtcd(endpoints []string, tlsConfig *tls.Config, tlsKey string) (*etcdclient.Client, error) {
	slices.Sort(endpoints)
	if tlsConfig == nil {
		tlsKey = ""
	}
	if cm.source != nil && cm.sourceTLSKey == tlsKey {
		if !slices.Equal(cm.sourceEndpoints, endpoints) {
			cm.source.SetEndpoints(endpoints...)
			cm.sourceEndpoints = endpoints
		}
		return cm.source, nil
	}
	cm.closeSource()
	cl, err := etcdclient.New(endpoints, tlsConfig)
	if err != nil {
		return nil, err
	}
	cm.source, cm.sourceEndpoints, cm.sourceTLSKey = cl, endpoints, tlsKey
	return cl, nil
}

func (cm *clusterMemory) closeClient() {
	if cm.client != nil {
		_ = cm.client.Close()
		cm.client = nil
	}
	cm.closeSource()
}

func (cm *clusterMemory) closeSource() {
	if cm.source != nil {
		_ = cm.source.Close()
		cm.source = nil
	}
}

// sawEtcd records that etcd answered at now and says whether the previous answer was recent enough
// for failure timers to keep running.
func (cm *clusterMemory) sawEtcd(now time.Time) (continuous bool) {
	continuous = !cm.lastSight.IsZero() && now.Sub(cm.lastSight) <= maxObservationGap
	cm.lastSight = now
	return continuous
}

// holdOff says how long action must still wait after its last failed attempt (0: try now). Passes
// come with every watch event, not only when a requeue falls due, so the wait is kept here.
func (cm *clusterMemory) holdOff(action string, now time.Time) time.Duration {
	if action != cm.action || !now.Before(cm.nextTry) {
		return 0
	}
	return cm.nextTry.Sub(now)
}

// actionFailed counts a failed attempt of action at now and returns how long to wait before the
// next one: 1s, 2s, 4s, … up to maxActionBackoff. Another action starts from 1s.
func (cm *clusterMemory) actionFailed(action string, now time.Time) time.Duration {
	if action != cm.action {
		cm.action, cm.failures = action, 0
	}
	cm.failures++
	d := min(time.Second<<min(cm.failures-1, 16), maxActionBackoff)
	cm.nextTry = now.Add(d)
	return d
}

func (cm *clusterMemory) actionSucceeded() {
	cm.action, cm.failures, cm.nextTry, cm.lastError = "", 0, time.Time{}, ""
}

// passFailed counts a pass that failed before deciding, and says whether it keeps failing.
func (cm *clusterMemory) passFailed(err error) (failing bool) {
	cm.passFailures++
	cm.passError = err.Error()
	return cm.passFailures >= failingAfter
}

func (cm *clusterMemory) passSucceeded() { cm.passFailures, cm.passError = 0, "" }

// leaderViewMaxAge is how long the leader's view of its peers is reused. A pass runs on every event
// of the cluster's pods (three or four a second while a member restarts), and each read renders the
// whole /metrics page of the member that serves every write. A member is replaced only after
// minutes of evidence (ReplaceAfter), so a view a second old decides the same.
const leaderViewMaxAge = time.Second

// leaderView is which peers the leader had a raft connection to, when.
type leaderView struct {
	leader uint64
	at     time.Time
	active map[uint64]bool
}

// peersOfLeader is leader's view of its peers: the one read less than leaderViewMaxAge before now
// (wall-clock time: this bounds load, it decides nothing), else a fresh one from read.
func (cm *clusterMemory) peersOfLeader(leader uint64, now time.Time, read func() (map[uint64]bool, error)) (map[uint64]bool, error) {
	if v := cm.leaderView; v != nil && v.leader == leader && !now.Before(v.at) && now.Sub(v.at) < leaderViewMaxAge {
		return v.active, nil
	}
	active, err := read()
	if err != nil {
		cm.leaderView = nil
		return nil, err
	}
	cm.leaderView = &leaderView{leader: leader, at: now, active: active}
	return active, nil
}
