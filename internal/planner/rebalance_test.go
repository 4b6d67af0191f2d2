package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// afterZoneOutage is a healthy three-member cluster after zone b came back: c-0 and c-1 run in zone
// a (c-1 replaced the member lost with zone b), c-2 in zone c, and zone b's node nb has been Ready
// for ten minutes, under the default placement.
func afterZoneOutage() Input {
	in := healthyCluster(3)
	in.Placement = Placement{
		NodeOf:  map[string]string{"c-0": "na1", "c-1": "na2", "c-2": "nc"},
		Zones:   Zones{Of: map[string]string{"na1": "a", "na2": "a", "nb": "b", "nc": "c"}, Open: []string{"a", "b", "c"}, OpenSince: map[string]time.Time{"a": now.Add(-time.Hour), "b": now.Add(-10 * time.Minute), "c": now.Add(-time.Hour)}},
		Default: true,
	}
	return in
}

// moving is afterZoneOutage with the move's learner c-3 added in zone b (recorded in status).
func moving(in *Input) {
	in.NextIndex = 4
	in.Known = append(in.Known, KnownMember{Name: "c-3", Zone: "b"})
	in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 4, Name: "c-3", Learner: true, PeerURLs: []string{"https://c-3"}})
	in.PVCs["c-3"] = PVCState{Exists: true}
	in.Rebalance = &Rebalance{Zone: "b", Member: "c-3", Started: now.Add(-10 * time.Minute)}
}

func TestDecideRebalance(t *testing.T) {
	unscheduled := func(d time.Duration) func(*Input) {
		return func(in *Input) {
			moving(in)
			in.Pods["c-3"] = PodState{Exists: true, Created: now.Add(-d), UnscheduledSince: now.Add(-d)}
		}
	}
	runDecideCases(t, []decideCase{
		{name: "a zone holding two more than a zone open for long: a learner that must run there", in: afterZoneOutage(),
			kind: AddLearner, members: []string{"c-3"}, reason: reason.RebalancingZones},
		{name: "not while a member is unhealthy", in: with(afterZoneOutage(), func(in *Input) { member(in, "c-2").Healthy = false }),
			kind: Wait, reason: reason.WaitingForHealth},
		{name: "not while a membership call is pending", in: with(afterZoneOutage(), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-9"}
		}), kind: FinishRemove, members: []string{"c-9"}},
		{name: "not while voters differ from spec.replicas", in: with(afterZoneOutage(), func(in *Input) { in.Replicas = 5 }),
			kind: AddLearner, reason: reason.ScalingUp},
		{name: "never under the user's placement", in: with(afterZoneOutage(), func(in *Input) { in.Placement.Default = false }),
			kind: None, reason: reason.Ready},
		{name: "not before the zone has been open for 2 minutes", in: with(afterZoneOutage(), func(in *Input) {
			in.Placement.Zones.OpenSince["b"] = now.Add(-90 * time.Second)
		}), kind: None, reason: reason.Ready},
		{name: "a shorter settle the operator was given (ZONE_SETTLE) moves sooner", in: with(afterZoneOutage(), func(in *Input) {
			in.Placement.Zones.OpenSince["b"] = now.Add(-90 * time.Second)
			in.Placement.ZoneSettle = time.Minute
		}), kind: AddLearner, reason: reason.RebalancingZones},
		{name: "a longer one waits longer", in: with(afterZoneOutage(), func(in *Input) {
			in.Placement.Zones.OpenSince["b"] = now.Add(-3 * time.Minute)
			in.Placement.ZoneSettle = 5 * time.Minute
		}), kind: None, reason: reason.Ready},
		{name: "not without an open zone holding fewer", in: with(afterZoneOutage(), func(in *Input) {
			in.Placement.Zones.Open = []string{"a", "c"}
		}), kind: None, reason: reason.Ready},
		{name: "not when the members are spread already", in: with(afterZoneOutage(), func(in *Input) { in.Placement.NodeOf["c-1"] = "nb" }),
			kind: None, reason: reason.Ready},
		{name: "not while a member has no node", in: with(afterZoneOutage(), func(in *Input) { in.Placement.NodeOf["c-1"] = "" }),
			kind: None, reason: reason.Ready},
		{name: "not within the backoff after a move was given up", in: with(afterZoneOutage(), func(in *Input) {
			in.Rebalance = &Rebalance{Zone: "b", Member: "c-3", Started: now.Add(-20 * time.Minute), GaveUp: now.Add(-10 * time.Minute)}
		}), kind: None, reason: reason.Ready},
		{name: "again once the backoff is over", in: with(afterZoneOutage(), func(in *Input) {
			in.Rebalance = &Rebalance{Zone: "b", Member: "c-3", Started: now.Add(-time.Hour), GaveUp: now.Add(-RebalanceBackoff)}
		}), kind: AddLearner, reason: reason.RebalancingZones},
		{name: "the learner waits for a node in its zone", in: with(afterZoneOutage(), unscheduled(time.Minute)),
			kind: Wait, reason: reason.WaitingForHealth},
		{name: "the learner that found no node in its zone is removed", in: with(afterZoneOutage(), unscheduled(RebalanceScheduleTimeout)),
			kind: RemoveMember, members: []string{"c-3"}, id: 4, reason: reason.ZoneRebalanceAbandoned},
		{name: "a learner placed in its zone has time to start", in: with(afterZoneOutage(), func(in *Input) {
			moving(in)
			in.Pods["c-3"] = PodState{Exists: true, Created: now.Add(-10 * time.Minute)}
		}), kind: Wait, reason: reason.WaitingForHealth},
		{name: "a learner placed in its zone that never starts is removed", in: with(afterZoneOutage(), func(in *Input) {
			moving(in)
			in.Pods["c-3"] = PodState{Exists: true, Created: now.Add(-RebalanceStartTimeout)}
		}), kind: RemoveMember, members: []string{"c-3"}, id: 4, reason: reason.ZoneRebalanceAbandoned},
		{name: "a learner without a zone is not the move's", in: with(afterZoneOutage(), func(in *Input) {
			unscheduled(time.Hour)(in)
			in.Known[3].Zone = ""
		}), kind: Wait, reason: reason.WaitingForHealth},
		{name: "once it votes, a member of the crowded zone is removed, not the newest", in: with(afterZoneOutage(), func(in *Input) {
			moving(in)
			member(in, "c-3").Learner, member(in, "c-3").Started, member(in, "c-3").Healthy = false, true, true
			in.Pods["c-3"] = PodState{Exists: true}
			in.Placement.NodeOf["c-3"] = "nb"
		}), kind: RemoveMember, members: []string{"c-1"}, id: 2, reason: reason.RebalancingZones},
		{name: "leadership leaves the crowded zone's member first", in: with(afterZoneOutage(), func(in *Input) {
			moving(in)
			member(in, "c-3").Learner, member(in, "c-3").Started, member(in, "c-3").Healthy = false, true, true
			in.Pods["c-3"] = PodState{Exists: true}
			in.Placement.NodeOf["c-3"] = "nb"
			in.Etcd.LeaderID = 2
		}), kind: MoveLeader, reason: reason.RebalancingZones},
	})
}

func TestRebalanceTargetsTheEmptiestSettledZone(t *testing.T) {
	// Five members, three in zone a; zones b (one member) and d (none) open, d only just.
	in := healthyCluster(5)
	in.Placement = Placement{
		NodeOf: map[string]string{"c-0": "na1", "c-1": "na2", "c-2": "na3", "c-3": "nb", "c-4": "nc"},
		Zones: Zones{Of: map[string]string{"na1": "a", "na2": "a", "na3": "a", "nb": "b", "nc": "c", "nd": "d"}, Open: []string{"a", "b", "c", "d"},
			OpenSince: map[string]time.Time{"a": now.Add(-time.Hour), "b": now.Add(-time.Hour), "c": now.Add(-time.Hour), "d": now.Add(-time.Minute)}},
		Default: true,
	}
	a := Decide(in)
	if a.Kind != AddLearner || a.Zone != "b" || a.Reason != reason.RebalancingZones {
		t.Fatalf("got %s %s zone %q (%s), want a learner in zone b: d is not settled yet", a.Kind, a.Reason, a.Zone, a.Message)
	}
	if !strings.Contains(a.Message, "zone a holds 3 members and zone b 1") {
		t.Errorf("message %q does not say which zones", a.Message)
	}
	in.Placement.Zones.OpenSince["d"] = now.Add(-DefaultZoneSettle)
	if a := Decide(in); a.Zone != "d" {
		t.Errorf("zone %q, want d: settled, and it holds the fewest", a.Zone)
	}
}

func TestPickRemovalPrefersTheMostCrowdedZone(t *testing.T) {
	ms := []EtcdMember{{ID: 1, Name: "c-0", Healthy: true}, {ID: 2, Name: "c-1", Healthy: true}, {ID: 3, Name: "c-2", Healthy: true}, {ID: 4, Name: "c-3", Healthy: true}}
	known := []KnownMember{{Name: "c-0"}, {Name: "c-1"}, {Name: "c-2"}, {Name: "c-3"}}
	zones := Zones{Of: map[string]string{"n0": "a", "n1": "b", "n2": "b", "n3": "c"}, Open: []string{"a", "b", "c"}}
	placed := Placement{NodeOf: map[string]string{"c-0": "n0", "c-1": "n1", "c-2": "n2", "c-3": "n3"}, Zones: zones}
	for _, tc := range []struct {
		name string
		p    Placement
		sick string
		want string
	}{
		{name: "zones unknown: the newest", p: Placement{}, want: "c-3"},
		{name: "the newest of the most crowded zone", p: placed, want: "c-2"},
		{name: "an unhealthy member before any zone", p: placed, sick: "c-0", want: "c-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cands := append([]EtcdMember(nil), ms...)
			for i := range cands {
				cands[i].Healthy = cands[i].Name != tc.sick
			}
			if got := pickRemoval(known, cands, tc.p); got.Name != tc.want {
				t.Errorf("removes %s, want %s", got.Name, tc.want)
			}
		})
	}
}
