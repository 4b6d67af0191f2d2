package etcdcluster

import (
	"slices"
	"testing"
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
