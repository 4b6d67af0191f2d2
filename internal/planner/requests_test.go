package planner

import (
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

func TestRequestsByAnnotation(t *testing.T) {
	runDecideCases(t, []decideCase{
		{name: "leadership moves to the member asked for", in: with(healthyCluster(3), func(in *Input) { in.LeaderRequested = "c-2" }),
			kind: MoveLeader, members: []string{"c-0", "c-2"}, id: 3, reason: reason.LeaderMoveRequested},
		{name: "the member asked for already leads", in: with(healthyCluster(3), func(in *Input) { in.LeaderRequested = "c-0" }),
			kind: None},
		{name: "an unknown member is not acted on", in: with(healthyCluster(3), func(in *Input) { in.LeaderRequested = "nope" }),
			kind: None},
		{name: "no voluntary move while a member is unhealthy", in: with(healthyCluster(3), func(in *Input) {
			in.LeaderRequested = "c-2"
			in.Etcd.Members[1].Healthy = false
		}), kind: Wait, reason: reason.WaitingForHealth},
		{name: "scaling goes first", in: with(healthyCluster(3), func(in *Input) {
			in.LeaderRequested = "c-2"
			in.Replicas = 5
		}), kind: AddLearner, reason: reason.ScalingUp},
		{name: "a requested defragmentation starts with a follower", in: with(healthyCluster(3), func(in *Input) { in.DefragRequested = map[string]bool{} }),
			kind: Defragment, members: []string{"c-1"}, id: 2, reason: reason.DefragmentRequested},
		{name: "then the next follower", in: with(healthyCluster(3), func(in *Input) { in.DefragRequested = map[string]bool{"c-1": true} }),
			kind: Defragment, members: []string{"c-2"}, id: 3, reason: reason.DefragmentRequested},
		{name: "the leader last, after handing leadership over", in: with(healthyCluster(3), func(in *Input) {
			in.DefragRequested = map[string]bool{"c-1": true, "c-2": true}
		}), kind: MoveLeader, members: []string{"c-0", "c-1"}, reason: reason.DefragmentRequested},
		{name: "a one-member cluster defragments its leader in place", in: with(healthyCluster(1), func(in *Input) { in.DefragRequested = map[string]bool{} }),
			kind: Defragment, members: []string{"c-0"}, id: 1, reason: reason.DefragmentRequested},
		{name: "every member done: nothing left", in: with(healthyCluster(3), func(in *Input) {
			in.DefragRequested = map[string]bool{"c-0": true, "c-1": true, "c-2": true}
		}), kind: None},
		{name: "defragmentation before a requested leader move", in: with(healthyCluster(3), func(in *Input) {
			in.DefragRequested = map[string]bool{}
			in.LeaderRequested = "c-2"
		}), kind: Defragment, members: []string{"c-1"}},
		{name: "paused: nothing", in: with(healthyCluster(3), func(in *Input) {
			in.Paused = true
			in.DefragRequested = map[string]bool{}
			in.LeaderRequested = "c-2"
		}), kind: Wait, reason: reason.Paused},
	})
}

// A healthy learner is promoted before any request is looked at; should one still be named, it is
// never asked to lead.
func TestLearnerIsNeverAskedToLead(t *testing.T) {
	in := with(healthyCluster(3), func(in *Input) { in.LeaderRequested = "c-2" })
	in.Etcd.Members[2].Learner = true
	if a, ok := decideRequests(in, in.Etcd); ok {
		t.Errorf("got %s %v for a learner", a.Kind, a.Members)
	}
}

// Request annotations are kept while they can still apply, and removed, with the event's message,
// once done or impossible.
func TestSettleRequests(t *testing.T) {
	etcd := func(mod func(e *Etcd)) *Etcd {
		e := healthyCluster(3).Etcd // c-0 leads
		if mod != nil {
			mod(e)
		}
		return e
	}
	learner := etcd(func(e *Etcd) { e.Members[2].Learner = true })
	cases := []struct {
		name   string
		settle func() RequestSettlement
		want   RequestSettlement
	}{
		{"move-leader: no answer from etcd, it waits", func() RequestSettlement { return SettleLeaderRequest("c-2", nil) },
			RequestSettlement{Request: "c-2"}},
		{"move-leader: a voter that does not lead, carried out", func() RequestSettlement { return SettleLeaderRequest("c-2", etcd(nil)) },
			RequestSettlement{Request: "c-2"}},
		{"move-leader: the member leads, done", func() RequestSettlement { return SettleLeaderRequest("c-0", etcd(nil)) },
			RequestSettlement{Outcome: RequestFulfilled, Message: `c-0 leads, as etcd.autopilot.dev/move-leader asked`}},
		{"move-leader: no such member, refused", func() RequestSettlement { return SettleLeaderRequest("c-9", etcd(nil)) },
			RequestSettlement{Outcome: RequestRefused, Message: `etcd.autopilot.dev/move-leader="c-9" names no member of this cluster; removed`}},
		{"move-leader: empty, refused", func() RequestSettlement { return SettleLeaderRequest("", etcd(nil)) },
			RequestSettlement{Outcome: RequestRefused, Message: `etcd.autopilot.dev/move-leader="" names no member of this cluster; removed`}},
		{"move-leader: a learner, refused", func() RequestSettlement { return SettleLeaderRequest("c-2", learner) },
			RequestSettlement{Outcome: RequestRefused, Message: `etcd.autopilot.dev/move-leader="c-2" names a learner, which cannot lead; removed`}},

		{"defragment: no answer from etcd, it stands", func() RequestSettlement {
			return SettleDefragRequest("now", map[string]bool{"c-0": true, "c-1": true, "c-2": true}, nil)
		}, RequestSettlement{}},
		{"defragment: no member listed, it stands", func() RequestSettlement {
			return SettleDefragRequest("now", map[string]bool{}, etcd(func(e *Etcd) { e.Members = nil }))
		}, RequestSettlement{}},
		{"defragment: one member left, it stands", func() RequestSettlement {
			return SettleDefragRequest("now", map[string]bool{"c-0": true, "c-2": true}, etcd(nil))
		}, RequestSettlement{}},
		{"defragment: every member done", func() RequestSettlement {
			return SettleDefragRequest("now", map[string]bool{"c-0": true, "c-1": true, "c-2": true}, etcd(nil))
		}, RequestSettlement{Outcome: RequestFulfilled, Message: `every member was defragmented, as etcd.autopilot.dev/defragment="now" asked`}},

		{"recover: quorum lost, carried out", func() RequestSettlement { return SettleRecoveryRequest(FromSurvivor, false, false) },
			RequestSettlement{Request: FromSurvivor}},
		{"recover: from a backup, carried out", func() RequestSettlement { return SettleRecoveryRequest(FromBackup, false, false) },
			RequestSettlement{Request: FromBackup}},
		{"recover: not a source, refused even while recovering", func() RequestSettlement { return SettleRecoveryRequest("yes", true, false) },
			RequestSettlement{Outcome: RequestRefused, Message: `etcd.autopilot.dev/recover-quorum="yes" is not a recovery source: write FromSurvivor or FromBackup`}},
		{"recover: under way, removed quietly", func() RequestSettlement { return SettleRecoveryRequest(FromSurvivor, true, true) },
			RequestSettlement{Outcome: RequestSuperseded}},
		{"recover: the cluster has quorum, refused", func() RequestSettlement { return SettleRecoveryRequest(FromBackup, false, true) },
			RequestSettlement{Outcome: RequestRefused, Message: "the cluster has quorum (a linearizable member list answered); etcd.autopilot.dev/recover-quorum is ignored and removed"}},
	}
	for _, tc := range cases {
		got := tc.settle()
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		if got.Remove() != (tc.want.Outcome != RequestStands) {
			t.Errorf("%s: Remove() %v for outcome %d", tc.name, got.Remove(), got.Outcome)
		}
	}
}
