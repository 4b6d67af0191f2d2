package etcdcluster

import (
	"errors"
	"maps"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestFailedActionsBackOffExponentiallyUpToACap(t *testing.T) {
	var cm clusterMemory
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	now := t0
	var got []time.Duration
	for range 12 {
		d := cm.backoff.actionFailed("RemoveMember[c-2]", now)
		got = append(got, d)
		// Passes woken by watch events in between do not try again.
		if w := cm.backoff.holdOff("RemoveMember[c-2]", now.Add(d/2)); w != d-d/2 {
			t.Fatalf("hold-off halfway through %s = %s", d, w)
		}
		now = now.Add(d)
		if w := cm.backoff.holdOff("RemoveMember[c-2]", now); w != 0 {
			t.Fatalf("hold-off when due = %s", w)
		}
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("backoff %d = %s, want %s (all: %v)", i, got[i], want[i]*time.Second, got)
		}
	}
	if w := cm.backoff.holdOff("Promote[c-3]", now.Add(-time.Second)); w != 0 {
		t.Fatalf("another action is held off %s by a failed one", w)
	}
	if d := cm.backoff.actionFailed("Promote[c-3]", now); d != time.Second {
		t.Fatalf("another action's backoff starts at 1s, got %s", d)
	}
	cm.backoff.actionSucceeded()
	if d := cm.backoff.actionFailed("Promote[c-3]", now); d != time.Second {
		t.Fatalf("after a success the backoff restarts at 1s, got %s", d)
	}
}

// Failure timers run only while etcd is watched without a gap: the first sight, and any sight after
// a gap longer than maxObservationGap, restarts them.
func TestObservationGapRestartsFailureTimers(t *testing.T) {
	var cm clusterMemory
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at         time.Duration
		continuous bool
	}{
		{0, false}, // first sight (e.g. right after an operator restart)
		{time.Second, true},
		{31 * time.Second, true},
		{31*time.Second + maxObservationGap + time.Second, false}, // the operator lost sight of etcd
		{32*time.Second + maxObservationGap + time.Second, true},
	}
	for i, s := range steps {
		if got := cm.sawEtcd(t0.Add(s.at)); got != s.continuous {
			t.Fatalf("step %d at %s: continuous = %v, want %v", i, s.at, got, s.continuous)
		}
	}
}

// A re-created EtcdCluster of the same name (new UID) never inherits its namesake's state.
func TestMemoryOfARecreatedClusterStartsAfresh(t *testing.T) {
	var m memory
	key := types.NamespacedName{Namespace: "ns", Name: "etcd"}
	m.of(key, "uid-1").backoff.actionFailed("a", time.Now())
	if m.of(key, "uid-1").backoff.failures != 1 {
		t.Fatal("state of the same cluster was not kept")
	}
	if m.of(key, "uid-2").backoff.failures != 0 {
		t.Fatal("a new incarnation inherited its namesake's state")
	}
	m.forget(key)
	if len(m.clusters) != 0 {
		t.Fatal("forget kept state")
	}
}

func TestTheLeadersViewOfItsPeersIsReadAtMostOnceASecond(t *testing.T) {
	cm := &clusterMemory{}
	reads := 0
	read := func(active map[uint64]bool, err error) func() (map[uint64]bool, error) {
		return func() (map[uint64]bool, error) { reads++; return active, err }
	}
	t0 := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	first := map[uint64]bool{2: true, 3: true}
	second := map[uint64]bool{2: true}

	steps := []struct {
		name   string
		leader uint64
		at     time.Duration
		read   func() (map[uint64]bool, error)
		want   map[uint64]bool
		err    bool
		reads  int
	}{
		{"first pass reads", 1, 0, read(first, nil), first, false, 1},
		{"a pass 300 ms later reuses it", 1, 300 * time.Millisecond, read(second, nil), first, false, 1},
		{"another leader is read afresh", 2, 400 * time.Millisecond, read(second, nil), second, false, 2},
		{"a second later it is read again", 2, 1400 * time.Millisecond, read(first, nil), first, false, 3},
		{"a failed read is not kept", 2, 2500 * time.Millisecond, read(nil, errors.New("no answer")), nil, true, 4},
		{"so the next pass reads again", 2, 2600 * time.Millisecond, read(second, nil), second, false, 5},
		{"a clock that went back reads again", 2, 2 * time.Second, read(first, nil), first, false, 6},
	}
	for _, s := range steps {
		got, err := cm.peersOfLeader(s.leader, t0.Add(s.at), s.read)
		if (err != nil) != s.err || !maps.Equal(got, s.want) || reads != s.reads {
			t.Fatalf("%s: got %v, %v after %d reads; want %v (error %t) after %d", s.name, got, err, reads, s.want, s.err, s.reads)
		}
	}
}
