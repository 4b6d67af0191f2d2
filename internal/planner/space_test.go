package planner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

const mb = 1 << 20

// sized is healthyCluster(3) (c-0 the leader) with a 100 MiB quota and databases of size/inUse MiB.
func sized(f func(in *Input)) Input {
	in := healthyCluster(3)
	in.Space = Space{Quota: 100 * mb, Revision: 500, AutoDefrag: true, MinFree: 64 * mb, MinFreePercent: 50}
	for i := range in.Etcd.Members {
		in.Etcd.Members[i].DBSize, in.Etcd.Members[i].DBSizeInUse = 20*mb, 18*mb
	}
	f(&in)
	return in
}

func db(in *Input, name string, size, inUse int64) {
	m := member(in, name)
	m.DBSize, m.DBSizeInUse = size*mb, inUse*mb
}

func TestSpaceDecisions(t *testing.T) {
	noSpace := func(in *Input) {
		in.Space.NoSpace = true
		for _, n := range []string{"c-0", "c-1", "c-2"} {
			db(in, n, 100, 40)
		}
	}
	cases := []struct {
		name    string
		in      Input
		kind    Kind
		members []string
		reason  reason.Reason
		says    string
	}{
		{name: "small and tidy: nothing to do", in: sized(func(*Input) {}), kind: None},
		{name: "NOSPACE: compact first", in: sized(noSpace), kind: Compact, reason: "NoSpace", says: "up to revision 500"},
		{name: "NOSPACE, a compaction remembered past the current revision (the cluster was rebuilt from an older backup since): compact again",
			in:   sized(func(in *Input) { noSpace(in); in.Space.Compacted = 900 }),
			kind: Compact, reason: "NoSpace", says: "up to revision 500"},
		{name: "NOSPACE, compacted: a follower is defragmented first",
			in:   sized(func(in *Input) { noSpace(in); in.Space.Compacted = 500 }),
			kind: Defragment, members: []string{"c-1"}, reason: "NoSpace"},
		{name: "NOSPACE, compacted: a member whose in-use size looks full is defragmented all the same (it is stale until a commit)",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted = 500
				db(in, "c-1", 100, 99)
			}),
			kind: Defragment, members: []string{"c-1"}, reason: "NoSpace"},
		{name: "NOSPACE, followers done: leadership moves off the leader",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted = 500
				in.Space.Defragmented = map[string]bool{"c-1": true, "c-2": true}
				db(in, "c-1", 40, 40)
				db(in, "c-2", 40, 40)
			}),
			kind: MoveLeader, members: []string{"c-0", "c-1"}, reason: "NoSpace"},
		{name: "NOSPACE, all defragmented below the quota: disarm",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted = 500
				in.Space.Defragmented = map[string]bool{"c-0": true, "c-1": true, "c-2": true}
				for _, n := range []string{"c-0", "c-1", "c-2"} {
					db(in, n, 41, 40)
				}
			}),
			kind: DisarmNoSpace, reason: "NoSpace"},
		{name: "NOSPACE, a raised quota not rolled out yet: the members restart with it before the alarm is disarmed (they would raise it again at once)",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted = 500
				in.Space.Defragmented = map[string]bool{"c-0": true, "c-1": true, "c-2": true}
				for _, n := range []string{"c-0", "c-1", "c-2"} {
					db(in, n, 41, 40)
					p := in.Pods[n]
					p.StaleQuota = true
					in.Pods[n] = p
				}
			}),
			kind: RollMember, members: []string{"c-1"}, reason: "NoSpace", says: "restarting c-1"},
		{name: "NOSPACE with live data filling the quota: escalate with the next step",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted = 500
				in.Space.Defragmented = map[string]bool{"c-0": true, "c-1": true, "c-2": true}
				for _, n := range []string{"c-0", "c-1", "c-2"} {
					db(in, n, 97, 95)
				}
			}),
			kind: Wait, reason: "NoSpaceLeft", says: "raise spec.etcd.quotaBackendBytes"},
		{name: "NOSPACE, the revision moved during the round (leases expired, keys deleted): the round goes on, no new compaction",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted, in.Space.Revision = 500, 530
				in.Space.Defragmented = map[string]bool{"c-1": true}
				db(in, "c-1", 40, 40)
			}),
			kind: Defragment, members: []string{"c-2"}, reason: "NoSpace"},
		{name: "NOSPACE, the revision moved during the round, every member defragmented below the quota: disarm",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted, in.Space.Revision = 500, 530
				in.Space.Defragmented = map[string]bool{"c-0": true, "c-1": true, "c-2": true}
				for _, n := range []string{"c-0", "c-1", "c-2"} {
					db(in, n, 41, 40)
				}
			}),
			kind: DisarmNoSpace, reason: "NoSpace"},
		{name: "NOSPACE, the round done and still full, keys deleted since its compaction: a new round compacts up to now",
			in: sized(func(in *Input) {
				noSpace(in)
				in.Space.Compacted, in.Space.Revision = 500, 530
				in.Space.Defragmented = map[string]bool{"c-0": true, "c-1": true, "c-2": true}
				for _, n := range []string{"c-0", "c-1", "c-2"} {
					db(in, n, 97, 95)
				}
			}),
			kind: Compact, reason: "NoSpace", says: "up to revision 530"},
		{name: "NOSPACE while a member is unhealthy: wait (never defragment with one down)",
			in:   sized(func(in *Input) { noSpace(in); in.Space.Compacted = 500; in.Etcd.Members[2].Healthy = false }),
			kind: Wait, reason: "WaitingForHealth"},
		{name: "near the quota, a tenth free is worth it even with the policy off",
			in:   sized(func(in *Input) { in.Space.AutoDefrag = false; db(in, "c-2", 85, 70) }),
			kind: Defragment, members: []string{"c-2"}, reason: "NearQuota"},
		{name: "fragmented past both thresholds",
			in:   sized(func(in *Input) { in.Space.Quota = 1 << 30; db(in, "c-1", 200, 60) }),
			kind: Defragment, members: []string{"c-1"}, reason: "Defragmenting"},
		{name: "fragmented, but under the byte threshold",
			in:   sized(func(in *Input) { in.Space.Quota = 1 << 30; db(in, "c-1", 100, 40) }),
			kind: None},
		{name: "fragmented, but under the percent threshold",
			in:   sized(func(in *Input) { in.Space.Quota = 1 << 30; db(in, "c-1", 400, 300) }),
			kind: None},
		{name: "policy Off: fragmentation alone does nothing",
			in:   sized(func(in *Input) { in.Space.Quota, in.Space.AutoDefrag = 1<<30, false; db(in, "c-1", 200, 60) }),
			kind: None},
		{name: "a one-member cluster defragments its leader in place",
			in: func() Input {
				in := healthyCluster(1)
				in.Space = Space{Quota: 1 << 30, AutoDefrag: true, MinFree: 64 * mb, MinFreePercent: 50}
				in.Etcd.Members[0].DBSize, in.Etcd.Members[0].DBSizeInUse = 200*mb, 20*mb
				return in
			}(),
			kind: Defragment, members: []string{"c-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Decide(tc.in)
			if a.Kind != tc.kind || (tc.members != nil && !reflect.DeepEqual(a.Members, tc.members)) ||
				(tc.reason != "" && a.Reason != tc.reason) || !strings.Contains(a.Message, tc.says) {
				t.Fatalf("got %+v\nwant kind %s members %v reason %q message containing %q", a, tc.kind, tc.members, tc.reason, tc.says)
			}
		})
	}
}

// Issue 30 item 2. Under NOSPACE etcd still applies deletes and lease revocations (kube-apiserver's
// event leases expire every minute), so the revision moves while members are defragmented, one a
// pass. The episode must end all the same: one compaction, each member defragmented once, disarmed.
func TestNoSpaceEpisodeEndsWhileTheRevisionMoves(t *testing.T) {
	in := sized(func(in *Input) {
		in.Space.NoSpace = true
		for _, n := range []string{"c-0", "c-1", "c-2"} {
			db(in, n, 100, 40)
		}
	})
	compactions, defrags := 0, map[string]int{}
	for step := 0; ; step++ {
		if step > 20 {
			t.Fatalf("NOSPACE not disarmed after %d steps: %d compactions, defragmentations %v", step, compactions, defrags)
		}
		a := Decide(in)
		switch a.Kind {
		case Compact:
			compactions++
			in.Space.Compacted, in.Space.Defragmented = a.Revision, map[string]bool{}
		case Defragment:
			defrags[a.Members[0]]++
			in.Space.Defragmented[a.Members[0]] = true
			db(&in, a.Members[0], 41, 40)
		case MoveLeader:
			in.Etcd.LeaderID = a.ID
		case DisarmNoSpace:
			if compactions != 1 || len(defrags) != 3 || defrags["c-0"] != 1 || defrags["c-1"] != 1 || defrags["c-2"] != 1 {
				t.Fatalf("disarmed after %d compactions and defragmentations %v, want 1 and each member once", compactions, defrags)
			}
			return
		default:
			t.Fatalf("step %d: %+v", step, a)
		}
		in.Space.Revision += 3 // a lease expired and its keys were deleted meanwhile
	}
}
