package planner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func name(i int32) string { return fmt.Sprintf("c-%d", i) }

// healthyCluster is a bootstrapped cluster of n healthy voters c-0..c-n-1 with pods and PVCs,
// c-0 the leader.
func healthyCluster(n int) Input {
	in := Input{
		Replicas: int32(n), Bootstrapped: true, NextIndex: int32(n), Now: now, MemberNameFunc: name, ReplaceAfter: 5 * time.Minute,
		Pods: map[string]PodState{}, PVCs: map[string]PVCState{}, Etcd: &Etcd{LeaderID: 1},
	}
	for i := 0; i < n; i++ {
		nm := name(int32(i))
		in.Known = append(in.Known, KnownMember{Name: nm})
		in.Pods[nm] = PodState{Exists: true, IP: fmt.Sprintf("10.0.0.%d", i)}
		in.PVCs[nm] = PVCState{Exists: true}
		in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: uint64(i + 1), Name: nm, Started: true, Healthy: true, RaftIndex: 100})
	}
	return in
}

// failing makes member i unreachable, reported failing by etcd since since.
func failing(in *Input, i int, since *time.Time) {
	in.Etcd.Members[i].Healthy = false
	in.Etcd.Members[i].Failing = "the leader has no raft connection to it"
	in.Known[i].FailingSince = since
}

func with(in Input, f func(*Input)) Input {
	// deep-enough copy so cases do not share maps and slices
	c := in
	c.Pods, c.PVCs = map[string]PodState{}, map[string]PVCState{}
	for k, v := range in.Pods {
		c.Pods[k] = v
	}
	for k, v := range in.PVCs {
		c.PVCs[k] = v
	}
	c.Known = append([]KnownMember(nil), in.Known...)
	if in.Etcd != nil {
		e := *in.Etcd
		e.Members = append([]EtcdMember(nil), in.Etcd.Members...)
		c.Etcd = &e
	}
	f(&c)
	return c
}

func member(in *Input, nm string) *EtcdMember {
	for i := range in.Etcd.Members {
		if in.Etcd.Members[i].Name == nm {
			return &in.Etcd.Members[i]
		}
	}
	panic(nm)
}

// decideCase is one row of a Decide table: what the planner sees and the action it must choose
// (members, id and reason are checked when set).
type decideCase struct {
	name    string
	in      Input
	kind    Kind
	members []string
	id      uint64
	reason  reason.Reason
}

func runDecideCases(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.in)
			if got.Kind != tc.kind {
				t.Fatalf("kind = %s (%s: %s), want %s", got.Kind, got.Reason, got.Message, tc.kind)
			}
			if tc.members != nil && !reflect.DeepEqual(got.Members, tc.members) {
				t.Errorf("members = %v, want %v", got.Members, tc.members)
			}
			if tc.id != 0 && got.ID != tc.id {
				t.Errorf("id = %d, want %d", got.ID, tc.id)
			}
			if tc.reason != "" && got.Reason != tc.reason {
				t.Errorf("reason = %s, want %s", got.Reason, tc.reason)
			}
			if got.Message == "" {
				t.Error("every action explains itself")
			}
		})
	}
}

func TestDecide(t *testing.T) {
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	cases := []decideCase{
		{name: "steady state does nothing", in: healthyCluster(3), kind: None, reason: "Ready"},
		{name: "paused does nothing even when broken", in: with(healthyCluster(3), func(in *Input) { in.Paused = true; in.Pods["c-1"] = PodState{} }), kind: Wait, reason: "Paused"},

		// bootstrap
		{name: "new cluster records its initial members", in: Input{Replicas: 3, MemberNameFunc: name, Now: now}, kind: InitBootstrap, members: []string{"c-0", "c-1", "c-2"}},
		{name: "initial members are created together", in: with(healthyCluster(3), func(in *Input) {
			in.Bootstrapped, in.Etcd = false, nil
			in.Pods, in.PVCs = map[string]PodState{"c-1": {Exists: true}}, map[string]PVCState{"c-1": {Exists: true}}
		}), kind: CreateMembers, members: []string{"c-0", "c-2"}},
		{name: "bootstrap waits for a quorum", in: with(healthyCluster(3), func(in *Input) { in.Bootstrapped, in.Etcd = false, nil }), kind: Wait, reason: "Bootstrapping"},
		{name: "bootstrap is recorded once etcd answers", in: with(healthyCluster(3), func(in *Input) { in.Bootstrapped = false }), kind: MarkBootstrapped},
		{name: "in-memory bootstrap needs no PVCs", in: with(healthyCluster(1), func(in *Input) {
			in.Bootstrapped, in.Etcd, in.EphemeralData, in.PVCs = false, nil, true, map[string]PVCState{}
		}), kind: Wait, reason: "Bootstrapping"},

		// failover
		{name: "deleted pod comes back on its volume", in: with(healthyCluster(3), func(in *Input) { in.Pods["c-1"] = PodState{}; member(in, "c-1").Healthy = false }), kind: CreateMembers, members: []string{"c-1"}},
		{name: "failed pod is deleted to be recreated", in: with(healthyCluster(3), func(in *Input) { in.Pods["c-2"] = PodState{Exists: true, Failed: true} }), kind: DeletePod, members: []string{"c-2"}},
		{name: "a deleted pod that has terminated is deleted without grace, to free its name", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-2"] = PodState{Exists: true, Failed: true, Deleting: true}
		}), kind: DeletePod, members: []string{"c-2"}},
		{name: "a deleted pod whose containers may still run is waited for", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-2"] = PodState{Exists: true, Deleting: true}
			member(in, "c-2").Healthy = false
		}), kind: Wait},
		{name: "a pod deleted without grace is not deleted again", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-2"] = PodState{Exists: true, Failed: true, Deleting: true, ForceDeleted: true}
			member(in, "c-2").Healthy = false
		}), kind: Wait},
		{name: "all pods gone and etcd silent: restart all on their volumes", in: with(healthyCluster(3), func(in *Input) { in.Pods, in.Etcd = map[string]PodState{}, nil }), kind: CreateMembers, members: []string{"c-0", "c-1", "c-2"}},
		{name: "etcd silent with pods present: wait, never re-bootstrap", in: with(healthyCluster(3), func(in *Input) { in.Etcd = nil }), kind: Wait, reason: "EtcdUnreachable"},
		{name: "lost PVC: member removed, not restarted empty", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-1"], in.PVCs["c-1"] = PodState{}, PVCState{}
			member(in, "c-1").Healthy = false
		}), kind: RemoveMember, members: []string{"c-1"}, id: 2, reason: "MemberDataLost"},
		{name: "PVC deleting and pod gone counts as lost", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-2"], in.PVCs["c-2"] = PodState{}, PVCState{Exists: true, Deleting: true}
		}), kind: RemoveMember, members: []string{"c-2"}, reason: "MemberDataLost", id: 3},
		{name: "PVC and pod both being deleted count as lost while the pod still stops", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-2"], in.PVCs["c-2"] = PodState{Exists: true, Deleting: true}, PVCState{Exists: true, Deleting: true}
		}), kind: RemoveMember, members: []string{"c-2"}, reason: "MemberDataLost", id: 3},
		{name: "PVC being deleted under a running pod: the member serves on, nothing is removed", in: with(healthyCluster(3), func(in *Input) {
			in.PVCs["c-2"] = PVCState{Exists: true, Deleting: true}
		}), kind: None},
		{name: "stopping leader whose PVC is deleted: its etcd hands leadership over as it stops", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-0"], in.PVCs["c-0"] = PodState{Exists: true, Deleting: true}, PVCState{Exists: true, Deleting: true}
		}), kind: Wait, reason: "MemberDataLost"},
		{name: "once another member leads, the stopping former leader is removed", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-0"], in.PVCs["c-0"] = PodState{Exists: true, Deleting: true}, PVCState{Exists: true, Deleting: true}
			in.Etcd.LeaderID = 2
		}), kind: RemoveMember, members: []string{"c-0"}, reason: "MemberDataLost", id: 1},
		{name: "running leader whose PVC is gone: leadership moves first", in: with(healthyCluster(3), func(in *Input) {
			in.PVCs["c-0"] = PVCState{}
		}), kind: MoveLeader, members: []string{"c-0", "c-1"}, reason: "MemberDataLost"},
		{name: "a stopping pod whose PVC stays is only a restart, never a loss", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-2"] = PodState{Exists: true, Deleting: true}
		}), kind: None},
		{name: "in-memory member whose pod is stopping is lost", in: with(healthyCluster(3), func(in *Input) {
			in.EphemeralData, in.PVCs = true, map[string]PVCState{}
			in.Pods["c-2"] = PodState{Exists: true, Deleting: true}
		}), kind: RemoveMember, members: []string{"c-2"}, reason: "MemberDataLost", id: 3},
		{name: "in-memory member whose pod went is lost", in: with(healthyCluster(3), func(in *Input) {
			in.EphemeralData, in.PVCs = true, map[string]PVCState{}
			in.Pods["c-0"] = PodState{}
			member(in, "c-0").Healthy = false
			in.Etcd.LeaderID = 2 // the survivors elected a new leader
		}), kind: RemoveMember, members: []string{"c-0"}, reason: "MemberDataLost", id: 1},
		{name: "after removal of a lost member, a replacement learner is added under a new name", in: with(healthyCluster(2), func(in *Input) { in.Replicas = 3; in.NextIndex = 3 }), kind: AddLearner, members: []string{"c-3"}},
		{name: "member failing briefly is left alone", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 2, ago(time.Minute))
		}), kind: Wait, reason: "WaitingForHealth"},
		{name: "member failing past the threshold is replaced", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 2, ago(in.ReplaceAfter))
		}), kind: RemoveMember, members: []string{"c-2"}, reason: "MemberUnhealthy", id: 3},
		{name: "failing on a cordoned node, nodeMaintenance Replace: replaced at once", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 2, ago(time.Second))
			in.NodeMaintenance, in.Cordoned = NodeMaintenanceReplace, map[string]string{"c-2": "node-b"}
		}), kind: RemoveMember, members: []string{"c-2"}, reason: "MemberOnCordonedNode", id: 3},
		{name: "failing on a cordoned node, WaitForNode: waits for the node", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 2, ago(time.Minute))
			in.NodeMaintenance, in.Cordoned = NodeMaintenanceWaitForNode, map[string]string{"c-2": "node-b"}
		}), kind: Wait, reason: "WaitingForHealth"},
		{name: "on a cordoned node but not failing, Replace: nothing (the pod has not been evicted)", in: with(healthyCluster(3), func(in *Input) {
			in.NodeMaintenance, in.Cordoned = NodeMaintenanceReplace, map[string]string{"c-2": "node-b"}
		}), kind: None},
		{name: "failing on a cordoned node, Replace, while another member is down: no removal that would break quorum", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 1, ago(time.Second))
			failing(in, 2, ago(time.Second))
			in.NodeMaintenance, in.Cordoned = NodeMaintenanceReplace, map[string]string{"c-1": "node-a", "c-2": "node-b"}
		}), kind: Wait},
		{name: "failing leader on a cordoned node, Replace: leadership moves first", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 0, ago(time.Second))
			member(in, "c-1").RaftIndex = 101
			in.NodeMaintenance, in.Cordoned = NodeMaintenanceReplace, map[string]string{"c-0": "node-a"}
		}), kind: MoveLeader, members: []string{"c-0", "c-1"}, id: 2, reason: "MemberOnCordonedNode"},
		{name: "a member only the operator cannot reach is never replaced", in: with(healthyCluster(3), func(in *Input) {
			member(in, "c-2").Healthy = false // no status answer, but etcd reports nothing wrong
			in.Known[2].FailingSince = ago(time.Hour)
		}), kind: Wait, reason: "WaitingForHealth"},
		{name: "never remove a failing member when the rest lack quorum", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 1, ago(time.Hour))
			failing(in, 2, ago(time.Hour))
		}), kind: Wait},
		{name: "failing leader: move leadership before removal", in: with(healthyCluster(3), func(in *Input) {
			failing(in, 0, ago(time.Hour))
			member(in, "c-2").RaftIndex = 101
		}), kind: MoveLeader, members: []string{"c-0", "c-2"}, id: 3},
		{name: "lost PVC while another member is down: no removal that would break quorum", in: with(healthyCluster(3), func(in *Input) {
			delete(in.PVCs, "c-0")
			in.Pods["c-0"] = PodState{}
			member(in, "c-0").Healthy = false
			member(in, "c-1").Healthy = false
		}), kind: Wait},

		// scaling
		{name: "scale up adds one learner with a fresh name", in: with(healthyCluster(3), func(in *Input) { in.Replicas, in.NextIndex = 5, 7 }), kind: AddLearner, members: []string{"c-7"}},
		{name: "learner without pod gets its pod and volume", in: with(healthyCluster(3), func(in *Input) {
			in.Replicas = 5
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 4, Name: "c-3", Learner: true})
		}), kind: CreateMembers, members: []string{"c-3"}},
		{name: "started learner is promoted", in: with(healthyCluster(3), func(in *Input) {
			in.Replicas = 5
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			in.Pods["c-3"], in.PVCs["c-3"] = PodState{Exists: true}, PVCState{Exists: true}
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 4, Name: "c-3", Learner: true, Started: true, Healthy: true})
		}), kind: Promote, members: []string{"c-3"}, id: 4},
		{name: "no second learner while one is learning", in: with(healthyCluster(3), func(in *Input) {
			in.Replicas = 5
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			in.Pods["c-3"], in.PVCs["c-3"] = PodState{Exists: true}, PVCState{Exists: true}
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 4, Name: "c-3", Learner: true, Started: true})
		}), kind: Wait, reason: "WaitingForHealth"},
		{name: "no scale-up while a member is unhealthy", in: with(healthyCluster(3), func(in *Input) { in.Replicas = 5; member(in, "c-1").Healthy = false }), kind: Wait},
		{name: "scale down removes the newest follower", in: with(healthyCluster(5), func(in *Input) { in.Replicas = 3 }), kind: RemoveMember, members: []string{"c-4"}, id: 5, reason: "ScalingDown"},
		{name: "scale down moves leadership off the newest member first", in: with(healthyCluster(3), func(in *Input) { in.Replicas = 1; in.Etcd.LeaderID = 3 }), kind: MoveLeader, members: []string{"c-2", "c-0"}, id: 1},
		{name: "no scale-down while a member is unhealthy", in: with(healthyCluster(5), func(in *Input) { in.Replicas = 3; member(in, "c-0").Healthy = false }), kind: Wait},

		// strays and crash recovery
		{name: "member unknown to the spec is removed", in: with(healthyCluster(3), func(in *Input) {
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 9, Name: "intruder", Started: true, Healthy: true})
		}), kind: RemoveMember, members: []string{"intruder"}, id: 9, reason: "UnknownMember"},
		{name: "unknown member is kept when removing it would break quorum", in: with(healthyCluster(1), func(in *Input) {
			member(in, "c-0").Healthy = false
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 9, Name: "intruder", Started: true})
		}), kind: Wait},
		{name: "stray pod and PVC are deleted", in: with(healthyCluster(3), func(in *Input) {
			in.Pods["c-9"], in.PVCs["c-9"] = PodState{Exists: true}, PVCState{Exists: true}
		}), kind: DeleteStrayObject, members: []string{"c-9"}},
		{name: "a pod of an unknown member that cannot be removed is never deleted", in: with(healthyCluster(1), func(in *Input) {
			member(in, "c-0").Healthy = false
			in.Pods["c-9"] = PodState{Exists: true}
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 9, Name: "c-9", Started: true, Healthy: true})
		}), kind: Wait},
		{name: "recorded member that never made it into etcd is forgotten", in: with(healthyCluster(3), func(in *Input) {
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
		}), kind: ForgetMember, members: []string{"c-3"}},
		{name: "crash after MemberAdd: the add is recognised, not repeated", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "AddMember", Member: "c-3"}
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 4, Name: "c-3", Learner: true})
		}), kind: FinishAdd, members: []string{"c-3"}, id: 4},
		{name: "crash before MemberAdd: the add is made", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "AddMember", Member: "c-3"}
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
		}), kind: AddLearner, members: []string{"c-3"}},
		{name: "crash after MemberRemove: cleanup finishes", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-3", ID: 4}
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
		}), kind: FinishRemove, members: []string{"c-3"}},
		{name: "crash before MemberRemove: the remove is made", in: with(healthyCluster(4), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-3", ID: 4}
		}), kind: RemoveMember, members: []string{"c-3"}, id: 4},
		{name: "a removal retried after a failure keeps its cause", in: with(healthyCluster(4), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-3", ID: 4, Reason: reason.MemberUnhealthy, Message: "c-3 has been failing since 12:00; replacing it"}
		}), kind: RemoveMember, members: []string{"c-3"}, id: 4, reason: "MemberUnhealthy"},
		{name: "an addition retried after a failure keeps its cause", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "AddMember", Member: "c-3", Reason: reason.ScalingUp, Message: "scaling 3 -> 4: adding learner c-3"}
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
		}), kind: AddLearner, members: []string{"c-3"}, reason: "ScalingUp"},
		{name: "an addition recorded before a voter failed is dropped: etcd accepts none, and the voter's replacement waits behind it", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "AddMember", Member: "c-3", Reason: reason.RebalancingZones, Message: "zone a holds 2 members and zone c 0: adding learner c-3"}
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			failing(in, 1, ago(time.Second))
		}), kind: ForgetMember, members: []string{"c-3"}, reason: "MembershipChangeDropped"},
		{name: "an addition already made is finished, a voter failing or not", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "AddMember", Member: "c-3"}
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 4, Name: "c-3", Learner: true})
			failing(in, 1, ago(time.Second))
		}), kind: FinishAdd, members: []string{"c-3"}, id: 4},
		{name: "a member only the operator cannot reach drops no recorded addition", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "AddMember", Member: "c-3"}
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			member(in, "c-1").Healthy = false
		}), kind: AddLearner, members: []string{"c-3"}},
		{name: "a removal that would now leave fewer healthy voters than a quorum is dropped", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-2", ID: 3, Reason: reason.ScalingDown, Message: "scaling 3 -> 2: removing c-2"}
			failing(in, 1, ago(time.Second))
		}), kind: DropPending, members: []string{"c-2"}, reason: "MembershipChangeDropped"},
		{name: "the recorded removal of the failing member itself goes on", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-2", ID: 3, Reason: reason.MemberUnhealthy, Message: "c-2 has been failing; replacing it"}
			failing(in, 2, ago(time.Hour))
		}), kind: RemoveMember, members: []string{"c-2"}, id: 3, reason: "MemberUnhealthy"},
		{name: "a removal made safe again by a fourth voter goes on with one failing", in: with(healthyCluster(4), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-3", ID: 4, Reason: reason.RebalancingZones, Message: "c-3 votes in zone c: removing c-0"}
			failing(in, 1, ago(time.Second))
		}), kind: RemoveMember, members: []string{"c-3"}, id: 4, reason: "RebalancingZones"},
		{name: "pending operation with etcd silent waits", in: with(healthyCluster(3), func(in *Input) {
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-2", ID: 3}
			in.Etcd = nil
		}), kind: Wait, reason: "EtcdUnreachable"},

		// alarms
		{name: "an alarm left by a removed member is disarmed (a CORRUPT one keeps every write refused)", in: with(healthyCluster(3), func(in *Input) {
			in.Etcd.Alarms = []Alarm{{MemberID: 2, Type: "NOSPACE"}, {MemberID: 9, Type: "CORRUPT"}}
		}), kind: DisarmAlarms, id: 9, reason: "AlarmOfRemovedMember"},
		{name: "an alarm on a current member, or on no member in particular, is left alone", in: with(healthyCluster(3), func(in *Input) {
			in.Etcd.Alarms = []Alarm{{MemberID: 2, Type: "CORRUPT"}, {MemberID: 0, Type: "CORRUPT"}}
		}), kind: None},
	}
	runDecideCases(t, cases)
}

// TestNeverBelowQuorum walks every small cluster shape and checks that no voluntary removal leaves
// fewer healthy voters than the quorum of the resulting cluster.
func TestNeverBelowQuorum(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for mask := 0; mask < 1<<n; mask++ { // bit i set = member i unhealthy
			for _, replicas := range []int32{1, 3, 5, 7} {
				in := healthyCluster(n)
				in.Replicas = replicas
				healthy := 0
				for i := 0; i < n; i++ {
					if mask&(1<<i) != 0 {
						failing(&in, i, &time.Time{})
					} else {
						healthy++
					}
				}
				a := Decide(in)
				if a.Kind != RemoveMember {
					continue
				}
				removedHealthy := 0
				if in.Etcd.Members[a.ID-1].Healthy {
					removedHealthy = 1
				}
				if healthy-removedHealthy < quorum(n-1) {
					t.Errorf("n=%d unhealthy=%b replicas=%d: %s of %v leaves %d healthy of %d voters", n, mask, replicas, a.Kind, a.Members, healthy-removedHealthy, n-1)
				}
			}
		}
	}
}

// at sets every member of in to run version v.
func at(in Input, v string) Input {
	in.TargetVersion = v
	for i := range in.Known {
		in.Known[i].Version = v
	}
	for n, p := range in.Pods {
		p.Version = v
		in.Pods[n] = p
	}
	for i := range in.Etcd.Members {
		in.Etcd.Members[i].Version = v
	}
	return in
}

// runs makes member name run 3.6.16.
func runs(in *Input, name string) {
	const v = "3.6.16"
	p := in.Pods[name]
	p.Version = v
	in.Pods[name] = p
	member(in, name).Version = v
	for i := range in.Known {
		if in.Known[i].Name == name {
			in.Known[i].Version = v
		}
	}
}

func TestUpgradeDecisions(t *testing.T) {
	base := at(healthyCluster(3), "3.5.35")
	base.UpgradeTimeout = 3 * time.Minute
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	at36 := with(at(healthyCluster(3), "3.6.16"), func(in *Input) {
		in.UpgradeTimeout = 3 * time.Minute
		for i := range in.Etcd.Members {
			in.Etcd.Members[i].StorageVersion = "3.6.0"
		}
	})
	downgrading := func(storage ...string) Input {
		return with(at36, func(in *Input) {
			in.TargetVersion = "3.5.35"
			for i := range in.Etcd.Members {
				in.Etcd.Members[i].DowngradeTarget = "3.5.0"
				in.Etcd.Members[i].StorageVersion = storage[i]
			}
		})
	}
	legacy := func(applied ...uint64) Input {
		return with(at36, func(in *Input) {
			in.TargetVersion, in.LegacyWALIndex, in.SnapshotCount = "3.7.3", 1000, 10000
			for i := range in.Etcd.Members {
				in.Etcd.Members[i].AppliedIndex = applied[i]
			}
		})
	}
	cases := []struct {
		name    string
		in      Input
		kind    Kind
		members []string
		version string
		reason  reason.Reason
		message string
	}{
		{name: "up to date does nothing", in: base, kind: None},
		{name: "followers are restarted first", in: with(base, func(in *Input) { in.TargetVersion = "3.6.16" }),
			kind: RollMember, members: []string{"c-1"}, version: "3.6.16", message: "0/3 members at 3.6.16, stepping 3.5.35 → 3.6.16"},
		{name: "next follower once the first is back", in: with(base, func(in *Input) { in.TargetVersion = "3.6.16"; runs(in, "c-1") }),
			kind: RollMember, members: []string{"c-2"}, message: "1/3 members at 3.6.16"},
		{name: "not before the restarted member's pod is Ready again", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			runs(in, "c-1")
			p := in.Pods["c-1"]
			p.NotReady = true
			in.Pods["c-1"] = p
		}), kind: Wait, message: "1/3 members at 3.6.16, stepping 3.5.35 → 3.6.16; waiting for c-1's pod to be Ready"},
		{name: "a member still to restart that is not Ready does not hold the roll", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			runs(in, "c-1")
			p := in.Pods["c-2"]
			p.NotReady = true
			in.Pods["c-2"] = p
		}), kind: RollMember, members: []string{"c-2"}},
		{name: "a member still to restart that is not Ready goes first: restarting another would leave the Service two members short", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			p := in.Pods["c-2"]
			p.NotReady = true
			in.Pods["c-2"] = p
		}), kind: RollMember, members: []string{"c-2"}, message: "0/3 members at 3.6.16, stepping 3.5.35 → 3.6.16; restarting c-2 at 3.6.16"},
		{name: "leader last, after moving leadership to an upgraded member", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			runs(in, "c-1")
			runs(in, "c-2")
			member(in, "c-2").RaftIndex = 105
		}), kind: MoveLeader, members: []string{"c-0", "c-2"}},
		{name: "former leader restarted once it is a follower", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			runs(in, "c-1")
			runs(in, "c-2")
			in.Etcd.LeaderID = 3
		}), kind: RollMember, members: []string{"c-0"}},
		{name: "skipping a minor steps through the newest 3.6 first", in: with(base, func(in *Input) { in.TargetVersion = "3.7.3" }),
			kind: RollMember, version: "3.6.16", message: "stepping 3.5.35 → 3.6.16 → 3.7.3"},
		{name: "a pod recreated mid-upgrade comes back at the step version", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			in.Pods["c-1"] = PodState{}
			member(in, "c-1").Healthy, member(in, "c-1").Version = false, ""
		}), kind: CreateMembers, members: []string{"c-1"}, version: "3.6.16"},
		{name: "no restart while a member lags behind the leader", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			member(in, "c-2").RaftIndex = 100
			member(in, "c-0").RaftIndex = 100 + maxCatchUpLag + 1
		}), kind: None},
		{name: "no restart while a member is unhealthy", in: with(base, func(in *Input) { in.TargetVersion = "3.6.16"; member(in, "c-2").Healthy = false }),
			kind: Wait, reason: "WaitingForHealth"},
		{name: "a two-minor downgrade is refused with the reason", in: with(at(healthyCluster(3), "3.7.3"), func(in *Input) { in.TargetVersion = "3.5.35" }),
			kind: Wait, reason: "VersionChangeRefused", message: "set spec.version to 3.6.16 first"},
		{name: "a minor downgrade first enables etcd's downgrade", in: with(at36, func(in *Input) { in.TargetVersion = "3.5.35" }),
			kind: EnableDowngrade, version: "3.5.0", message: "stepping 3.6.16 → 3.5.35"},
		{name: "no member restarts before every member migrated its data", in: downgrading("3.5.0", "3.6.0", "3.5.0"),
			kind: Wait, reason: "Upgrading", message: "c-1 at 3.6.0"},
		{name: "once migrated, followers are downgraded first", in: downgrading("3.5.0", "3.5.0", "3.5.0"),
			kind: RollMember, members: []string{"c-1"}, version: "3.5.35"},
		{name: "a pod recreated before the migration keeps the newer version", in: with(downgrading("3.6.0", "3.6.0", "3.6.0"), func(in *Input) {
			in.Pods["c-1"] = PodState{}
			member(in, "c-1").Healthy, member(in, "c-1").Version = false, ""
		}), kind: CreateMembers, members: []string{"c-1"}, version: "3.6.16"},
		{name: "a member rolled for the downgrade comes back at the older version", in: with(downgrading("3.5.0", "3.5.0", "3.5.0"), func(in *Input) {
			in.Pods["c-1"] = PodState{}
			member(in, "c-1").Healthy, member(in, "c-1").Version, member(in, "c-1").StorageVersion, member(in, "c-1").DowngradeTarget = false, "", "", ""
		}), kind: CreateMembers, members: []string{"c-1"}, version: "3.5.35"},
		{name: "after the first downgraded member the others follow", in: with(downgrading("3.5.0", "3.5.0", "3.5.0"), func(in *Input) {
			p := in.Pods["c-1"]
			p.Version = "3.5.35"
			in.Pods["c-1"] = p
			member(in, "c-1").Version, member(in, "c-1").StorageVersion = "3.5.35", ""
		}), kind: RollMember, members: []string{"c-2"}, version: "3.5.35"},
		{name: "spec.version back up mid-downgrade: etcd's downgrade is cancelled", in: with(downgrading("3.5.0", "3.5.0", "3.5.0"), func(in *Input) { in.TargetVersion = "3.6.16" }),
			kind: CancelDowngrade, version: "3.5.0", message: "cancelling etcd's downgrade to 3.5.0"},
		{name: "a recorded downgrade is cancelled even when no member reports it", in: with(at36, func(in *Input) { in.DowngradeRecorded = "3.5.0" }),
			kind: CancelDowngrade, version: "3.5.0"},
		{name: "a recorded downgrade that spec.version still asks for is kept", in: with(downgrading("3.5.0", "3.5.0", "3.5.0"), func(in *Input) { in.DowngradeRecorded = "3.5.0" }),
			kind: RollMember, version: "3.5.35"},
		{name: "3.7 waits until every member snapshotted past the 3.5 entries", in: legacy(11001, 11001, 9000),
			kind: AdvanceLog, message: "etcd 3.7 cannot replay"},
		{name: "3.7 proceeds once every member is past them", in: legacy(11001, 11002, 11001),
			kind: RollMember, members: []string{"c-1"}, version: "3.7.3"},
		{name: "3.7 waits for members still running a higher snapshot count than the one recorded (a lowered count not rolled yet)",
			in: with(legacy(11001, 11002, 11001), func(in *Input) {
				for _, n := range []string{"c-0", "c-2"} {
					p := in.Pods[n]
					p.SnapshotCount = 100000
					in.Pods[n] = p
				}
			}),
			kind: AdvanceLog, message: "appending 90000 entries"},
		{name: "a one-member cluster restarts its only member (there is nobody to hand leadership to)", in: with(at(healthyCluster(1), "3.5.35"), func(in *Input) {
			in.TargetVersion = "3.6.16"
		}), kind: RollMember, members: []string{"c-0"}, version: "3.6.16"},
		{name: "a one-member in-memory cluster is never restarted: its data would go with the pod", in: with(at(healthyCluster(1), "3.5.35"), func(in *Input) {
			in.TargetVersion, in.EphemeralData = "3.6.16", true
		}), kind: Wait, message: "storage.medium Memory"},
		{name: "a cluster born on 3.6 steps to 3.7 directly", in: with(legacy(5, 5, 5), func(in *Input) { in.LegacyWALIndex = 0 }),
			kind: RollMember, version: "3.7.3"},
		{name: "an upgraded member that stays unhealthy is rolled back", in: with(base, func(in *Input) {
			in.TargetVersion = "3.6.16"
			p := in.Pods["c-1"]
			p.Version = "3.6.16"
			in.Pods["c-1"] = p
			failing(in, 1, ago(3*time.Minute+time.Second))
			member(in, "c-1").Version = ""
		}), kind: RollMember, members: []string{"c-1"}, version: "3.5.35", reason: "UpgradeFailed"},
		{name: "after a failed upgrade the operator waits for a new target", in: with(base, func(in *Input) { in.TargetVersion = "3.6.16"; in.Blocked = "3.6.16" }),
			kind: Wait, reason: "UpgradeFailed"},
		{name: "after a failed upgrade, recreated pods run the cluster version", in: with(base, func(in *Input) {
			in.TargetVersion, in.Blocked = "3.6.16", "3.6.16"
			in.Pods["c-2"] = PodState{}
			member(in, "c-2").Healthy = false
		}), kind: CreateMembers, version: "3.5.35"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.in)
			if tc.kind == None && got.Kind == Wait {
				// "lagging" waits are fine too; what matters is that nothing is restarted
				if got.Reason != "Upgrading" {
					t.Fatalf("got %s (%s)", got.Kind, got.Message)
				}
				return
			}
			if got.Kind != tc.kind {
				t.Fatalf("kind = %s (%s: %s), want %s", got.Kind, got.Reason, got.Message, tc.kind)
			}
			if tc.members != nil && !reflect.DeepEqual(got.Members, tc.members) {
				t.Errorf("members = %v, want %v", got.Members, tc.members)
			}
			if tc.version != "" && got.Version != tc.version {
				t.Errorf("version = %s, want %s", got.Version, tc.version)
			}
			if tc.reason != "" && got.Reason != tc.reason {
				t.Errorf("reason = %s, want %s", got.Reason, tc.reason)
			}
			if tc.message != "" && !strings.Contains(got.Message, tc.message) {
				t.Errorf("message %q lacks %q", got.Message, tc.message)
			}
		})
	}
}

func TestLegacyWALIndex(t *testing.T) {
	e := []uint64{700, 900, 800}
	for _, tc := range []struct {
		old       uint64
		prev, now string
		want      uint64
	}{
		{0, "3.5.35", "3.6.16", 900}, // the last 3.5 member is gone: mark the leader's index
		{0, "3.5.35", "3.5.35", 0},
		{0, "3.6.16", "3.7.3", 0},    // no 3.5 history
		{50, "3.6.16", "3.6.16", 50}, // kept
		{0, "", "3.6.16", 0},         // first observation: unknown history is not guessed
	} {
		if got := LegacyWALIndex(tc.old, tc.prev, tc.now, e); got != tc.want {
			t.Errorf("LegacyWALIndex(%d, %q, %q) = %d, want %d", tc.old, tc.prev, tc.now, got, tc.want)
		}
	}
}

func TestReconfigureDecisions(t *testing.T) {
	// configured: every pod built from configuration "new"; c-0 leads.
	configured := with(at(healthyCluster(3), "3.6.16"), func(in *Input) {
		in.ConfigHash = "new"
		for n, p := range in.Pods {
			p.ConfigHash = "new"
			in.Pods[n] = p
		}
	})
	hash := func(in *Input, name, h string) {
		p := in.Pods[name]
		p.ConfigHash = h
		in.Pods[name] = p
	}
	cases := []struct {
		name    string
		in      Input
		kind    Kind
		members []string
	}{
		{"nothing to do when every pod runs the configuration", configured, None, nil},
		{"a pod of an earlier operator is adopted, not restarted", with(configured, func(in *Input) { hash(in, "c-1", "") }), AdoptPod, []string{"c-1"}},
		{"a changed spec restarts followers first", with(configured, func(in *Input) {
			in.ConfigHash = "newer"
		}), RollMember, []string{"c-1"}},
		{"then the leader, after moving leadership", with(configured, func(in *Input) {
			in.ConfigHash = "newer"
			hash(in, "c-1", "newer")
			hash(in, "c-2", "newer")
		}), MoveLeader, []string{"c-0", "c-1"}},
		{"never while a member is unhealthy", with(configured, func(in *Input) {
			in.ConfigHash = "newer"
			member(in, "c-2").Healthy = false
		}), Wait, nil},
		{"a version change goes first; its restarts carry the new configuration", with(configured, func(in *Input) {
			in.ConfigHash, in.TargetVersion = "newer", "3.7.3"
		}), RollMember, []string{"c-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.in)
			if got.Kind != tc.kind || (tc.members != nil && !reflect.DeepEqual(got.Members, tc.members)) {
				t.Fatalf("got %s %v (%s: %s), want %s %v", got.Kind, got.Members, got.Reason, got.Message, tc.kind, tc.members)
			}
			if tc.kind == RollMember && tc.in.TargetVersion == "3.6.16" && got.Version != "3.6.16" {
				t.Errorf("a configuration roll changed the version to %s", got.Version)
			}
		})
	}
}

// A removal etcd applied although the call timed out ends without its own event: the finish says why
// the member went.
func TestFinishedRemovalTellsItsCause(t *testing.T) {
	in := with(healthyCluster(3), func(in *Input) {
		in.Pending = &Pending{Type: "RemoveMember", Member: "c-3", ID: 4, Reason: reason.MemberUnhealthy, Message: "c-3 has been failing since 12:00; replacing it"}
		in.Known = append(in.Known, KnownMember{Name: "c-3"})
	})
	a := Decide(in)
	if a.Kind != FinishRemove || !strings.Contains(a.Message, "(MemberUnhealthy: c-3 has been failing since 12:00; replacing it)") {
		t.Fatalf("%s: %s", a.Kind, a.Message)
	}
}

// A recorded operation is retried each second while etcd refuses it, and each attempt records the
// action's message again: the retry note is added once, so the status does not grow with retries.
func TestRetriedOperationsKeepTheirMessage(t *testing.T) {
	for _, pending := range []Pending{
		{Type: "AddMember", Member: "c-3", Reason: reason.ScalingUp, Message: "scaling 3 -> 4: adding learner c-3"},
		{Type: "RemoveMember", Member: "c-3", ID: 4, Reason: reason.MemberUnhealthy, Message: "c-3 has been failing; replacing it"},
	} {
		in := healthyCluster(4) // c-3 is in etcd: its removal is retried
		if pending.Type == "AddMember" {
			in = healthyCluster(3) // c-3 is not yet: its addition is retried
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
		}
		in.Pending = &pending
		first := Decide(in)
		for range 5 {
			in.Pending.Message = Decide(in).Message // what the controller records with each attempt
		}
		if last := Decide(in).Message; last != first.Message || strings.Count(last, "retrying") != 1 {
			t.Errorf("%s: message after retries %q, first %q", pending.Type, last, first.Message)
		}
	}
}
