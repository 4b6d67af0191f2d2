package etcdcluster

import (
	"slices"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
)

// The leader's count of active peers is asked about suspects only: one member gone must not get a
// member that answers and is Ready declared cut off because that count says 0 for it (seen after a
// restart with a new IP: a late failure to reach the old address left the peer marked inactive).
func TestCutOffOnlyConcernsSuspects(t *testing.T) {
	const leader, answering, gone, starting = 1, 2, 3, 4
	active := map[uint64]bool{starting: true}
	got := cutOff(map[uint64]bool{gone: true, starting: true, leader: true}, active, leader)
	if !slices.Equal(got, []uint64{gone}) {
		t.Fatalf("cut off %v, want only the gone member %d (not %d, which answers and is Ready)", got, gone, answering)
	}
	if got := cutOff(map[uint64]bool{}, active, leader); len(got) != 0 {
		t.Fatalf("cut off %v without suspects", got)
	}
}

// A removal is asked of the leader first, then of the other voting members that answered this pass,
// never of the member removed, a learner, or a member that did not answer or has no endpoint.
func TestRemovalEndpoints(t *testing.T) {
	o := &observation{
		members:   []etcdclient.Member{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4, IsLearner: true}, {ID: 5}, {ID: 6}},
		status:    map[uint64]etcdclient.Status{1: {}, 2: {}, 3: {}, 4: {}, 6: {}},
		endpoints: map[uint64]string{1: "https://a", 2: "https://b", 3: "https://c", 4: "https://d", 5: "https://e"},
		leaderID:  2,
	}
	for _, tc := range []struct {
		remove uint64
		leader uint64
		want   []string
	}{
		{remove: 1, leader: 2, want: []string{"https://b", "https://c"}},
		{remove: 3, leader: 2, want: []string{"https://b", "https://a"}},
		{remove: 2, leader: 2, want: []string{"https://a", "https://c"}}, // the leader itself: the others
		{remove: 1, leader: 0, want: []string{"https://b", "https://c"}}, // no leader seen: the voters that answered
	} {
		o.leaderID = tc.leader
		if got := o.removalEndpoints(tc.remove); !slices.Equal(got, tc.want) {
			t.Errorf("removing %d with leader %d: asked at %v, want %v", tc.remove, tc.leader, got, tc.want)
		}
	}
}
