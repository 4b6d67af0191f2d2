package etcdcluster

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// maxObservationGap: when the operator has not seen a cluster's etcd answer for longer than this
// (it was down, partitioned from the cluster, or the whole cluster was), what it knew of failing
// members is stale, and every member gets a fresh grace period before it may be replaced.
const maxObservationGap = 2 * time.Minute

// maxActionBackoff caps the wait before a failed action is tried again.
const maxActionBackoff = 5 * time.Minute

// memory is the operator's in-process state per EtcdCluster: its etcd clients reused across busy passes,
// when etcd last answered, how often the last actions failed, and the histories that span passes
// (disk slowness, auto-tuning, a defragment request). Losing it (a restart) only costs new clients,
// a fresh grace period, a reset backoff and windows measured again.
type memory struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*clusterMemory
}

// clusterMemory is one cluster's part of memory, a composition of small typed parts, each with the
// methods that keep it.
type clusterMemory struct {
	uid types.UID
	// member is the client of the operator's own member pods; source, the client of the old members
	// of a cluster being taken over: plain text into client TLS (one client per scheme: clientv3
	// picks one transport for all of a client's endpoints, and the operator's client certificate
	// never goes to plain-text old members), or TLS verified per host from a cluster with TLS
	// (migrateFrom.caSecret, identified by the operator's own client Secret).
	member, source etcdConn
	// lastSight is when etcd last answered a pass.
	lastSight time.Time
	// outOfReachSince is when the passes first found the quorum out of reach (zero while it is in
	// reach): Available holds through a leader election (planner.AvailabilityGrace).
	outOfReachSince time.Time
	// backoff is how the last actions and passes failed.
	backoff backoff
	// slowness is the members' disk history (observeSlowness).
	slowness slowHistory
	// tuning is the auto-tuning history (observeTuning).
	tuning tuningHistory
	// defrag is the progress of the defragment annotation (settleDefragRequest).
	defrag defragProgress
	// leaderView is the leader's last read view of its peers (observeFailures).
	leaderView *leaderView
	// ownWrite is the resourceVersion the operator's last write left the cluster at, until the
	// cache shows it or a later one (EtcdClusterReconciler.cacheBehind).
	ownWrite string
	// dryRun is the API server's verdict on the objects built from one generation of the spec.
	dryRun *dryRunVerdict
}

// backoff counts consecutive failed attempts of one action, which is not tried again before
// nextTry, and consecutive passes that failed before deciding.
type backoff struct {
	failures int
	action   string
	nextTry  time.Time
	// lastError is the error of action's last failed attempt; passFailures and passError count the
	// passes in a row that failed before deciding (an object the pass keeps could not be written).
	lastError string
	// conflict is the object in the way of action's last failed attempt, if that was what failed: it
	// stays reported while the action is held off, not replaced by a health-only Degraded=False.
	conflict     *nameConflict
	passFailures int
	passError    string
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
		cm.closeClients()
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
		cm.closeClients()
		delete(m.clusters, key)
	}
}

// rememberOwnWrite keeps the resourceVersion a pass's writes left the cluster at (read: the one
// the pass started from; the same when it wrote nothing).
func (cm *clusterMemory) rememberOwnWrite(read, written string) {
	if written != read {
		cm.ownWrite = written
	}
}

func (cm *clusterMemory) closeClients() {
	cm.member.close()
	cm.source.close()
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
func (b *backoff) holdOff(action string, now time.Time) time.Duration {
	if action != b.action || !now.Before(b.nextTry) {
		return 0
	}
	return b.nextTry.Sub(now)
}

// actionFailed counts a failed attempt of action at now and returns how long to wait before the
// next one: 1s, 2s, 4s, … up to maxActionBackoff. Another action starts from 1s.
func (b *backoff) actionFailed(action string, now time.Time) time.Duration {
	if action != b.action {
		b.action, b.failures = action, 0
	}
	b.failures++
	d := min(time.Second<<min(b.failures-1, 16), maxActionBackoff)
	b.nextTry = now.Add(d)
	return d
}

func (b *backoff) actionSucceeded() {
	b.action, b.failures, b.nextTry, b.lastError, b.conflict = "", 0, time.Time{}, "", nil
}

// failing says whether action has failed failingAfter times in a row.
func (b *backoff) failing(action string) bool {
	return b.action == action && b.failures >= failingAfter
}

// passFailed counts a pass that failed before deciding, and says whether it keeps failing.
func (b *backoff) passFailed(err error) (failing bool) {
	b.passFailures++
	b.passError = err.Error()
	return b.passFailures >= failingAfter
}

func (b *backoff) passSucceeded() { b.passFailures, b.passError = 0, "" }

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
