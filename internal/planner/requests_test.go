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
