package planner

import (
	"reflect"
	"strings"
	"testing"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// quorumLost is healthyCluster(n) after no member answers a linearizable call: the members named in
// alive still run (without a leader) and report their index (committed and applied alike), all
// others are down.
func quorumLost(n int, alive map[string]uint64) Input {
	in := healthyCluster(n)
	view := in.Etcd.Members
	in.Etcd = nil
	in.QuorumLoss = FromSurvivor
	for _, m := range view {
		if idx, ok := alive[m.Name]; ok {
			in.Survivors = append(in.Survivors, Survivor{Name: m.Name, ID: m.ID, CommittedIndex: idx, AppliedIndex: idx, Members: view})
		}
	}
	return in
}

// dataGone deletes a member's pod and volume.
func dataGone(names ...string) func(*Input) {
	return func(in *Input) {
		for _, n := range names {
			delete(in.Pods, n)
			delete(in.PVCs, n)
		}
	}
}

func TestQuorumLossDecisions(t *testing.T) {
	cases := []struct {
		name    string
		in      Input
		kind    Kind
		members []string
		source  string
		reason  reason.Reason
		says    string // part of the message
		index   uint64 // the committed index recorded with the recovery, when not 0
	}{
		{name: "majority's data gone: recover from the survivor",
			in:   with(quorumLost(3, map[string]uint64{"c-0": 90}), dataGone("c-1", "c-2")),
			kind: StartRecovery, members: []string{"c-0"}, source: FromSurvivor, reason: "QuorumLost", says: "2 of 3 voting members lost their data [c-1 c-2]"},
		{name: "a member the operator cannot name (added by hand, peer URL not its own) is not known to have lost anything: no recovery",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1")(in)
				in.Survivors[0].Members[2].Name = "" // c-2's peer URL is not one the operator makes
				delete(in.Pods, "c-2")
				delete(in.PVCs, "c-2")
				in.Known = in.Known[:2]
			}),
			kind: Wait, reason: "EtcdUnreachable"},
		{name: "a member down with its volume may come back: restart it, no recovery",
			in:   with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) { dataGone("c-1")(in); delete(in.Pods, "c-2") }),
			kind: CreateMembers, members: []string{"c-2"}, reason: "RestartingMembers"},
		{name: "a pod still there without its volume may still run etcd: not lost",
			in:   with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) { delete(in.PVCs, "c-1"); delete(in.PVCs, "c-2") }),
			kind: Wait, reason: "EtcdUnreachable"},
		{name: "a survivor with a leader means quorum exists: never recover",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.Survivors[0].Leader = 2
			}),
			kind: Wait, reason: "EtcdUnreachable"},
		{name: "a down member may hold more log: wait for it before choosing",
			in: with(quorumLost(5, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2", "c-3")(in)
			}),
			kind: Wait, reason: "QuorumLost", says: "waiting for [c-4] to answer"},
		{name: "the survivor with the most applied log is chosen",
			in:   with(quorumLost(5, map[string]uint64{"c-0": 90, "c-4": 120}), dataGone("c-1", "c-2", "c-3")),
			kind: StartRecovery, members: []string{"c-4"}, source: FromSurvivor, reason: "QuorumLost", says: "committed index 120", index: 120},
		// --force-new-cluster keeps what the WAL holds up to its commit index; apply lags commit under
		// a slow backend, and entries 951-1000 may have been acknowledged to clients.
		{name: "the survivor with the most committed log is chosen, not the one that applied most",
			in:   with(survivorsCommittedApplied(), func(*Input) {}),
			kind: StartRecovery, members: []string{"c-0"}, source: FromSurvivor, says: "committed index 1000", index: 1000},
		{name: "equal committed logs: the one that applied more, then the first name",
			in: with(survivorsCommittedApplied(), func(in *Input) {
				in.Survivors[0].CommittedIndex, in.Survivors[1].CommittedIndex = 1000, 1000
				in.Survivors[1].AppliedIndex = 990
			}),
			kind: StartRecovery, members: []string{"c-1"}, source: FromSurvivor, index: 1000},
		{name: "Manual waits and says how to trigger",
			in:   with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) { dataGone("c-1", "c-2")(in); in.QuorumLoss = Manual }),
			kind: Wait, reason: "QuorumLost", says: RecoverAnnotation + "=FromSurvivor"},
		{name: "Manual with the annotation recovers",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.QuorumLoss, in.RecoveryRequested = Manual, FromSurvivor
			}),
			kind: StartRecovery, members: []string{"c-0"}, source: FromSurvivor, reason: "QuorumLost"},
		{name: "the annotation overrides members that are only down",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				delete(in.Pods, "c-1")
				delete(in.Pods, "c-2")
				in.RecoveryRequested = FromSurvivor
			}),
			kind: StartRecovery, members: []string{"c-0"}, source: FromSurvivor, says: "requested"},
		{name: "the annotation never overrides a leader",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.RecoveryRequested = FromSurvivor
				in.Survivors[0].Leader = 1
			}),
			kind: Wait, reason: "EtcdUnreachable"},
		{name: "FromBackup without a backup waits and says so",
			in:   with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) { dataGone("c-1", "c-2")(in); in.QuorumLoss = FromBackup }),
			kind: Wait, reason: "QuorumLost", says: "no successful EtcdBackup"},
		{name: "FromBackup restores the newest backup",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.QuorumLoss, in.NewestBackup = FromBackup, "nightly-7"
			}),
			kind: StartRecovery, source: FromBackup, says: "EtcdBackup nightly-7"},
		{name: "FromBackup past a corrupt newer backup says which one it passed over",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.QuorumLoss, in.NewestBackup, in.BackupNote = FromBackup, "nightly-6", "newer backups are marked corrupt and not used: nightly-7 (sha256 differs); nightly-6 is the newest good one"
			}),
			kind: StartRecovery, source: FromBackup, says: "EtcdBackup nightly-6 (newer backups are marked corrupt and not used: nightly-7"},
		{name: "FromBackup when every backup is corrupt waits and says so",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.QuorumLoss, in.BackupNote = FromBackup, "every backup of this cluster is marked corrupt: nightly-7 (x)"
			}),
			kind: Wait, reason: "QuorumLost", says: "every backup of this cluster is marked corrupt"},
		{name: "only a learner survives: never promoted to the whole cluster on its own",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.Survivors[0].Learner = true
			}),
			kind: Wait, reason: "QuorumLost", says: "only learners survive"},
		{name: "in-memory members lose their data with their pod, and the survivor would lose it on restart: only a backup helps",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				in.EphemeralData = true
				delete(in.Pods, "c-1")
				delete(in.Pods, "c-2")
			}),
			kind: Wait, reason: "QuorumLost", says: RecoverAnnotation + "=" + FromBackup},
		{name: "in-memory members, FromBackup",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				in.EphemeralData, in.QuorumLoss, in.NewestBackup = true, FromBackup, "b"
				delete(in.Pods, "c-1")
				delete(in.Pods, "c-2")
			}),
			kind: StartRecovery, source: FromBackup},
		{name: "a pending membership call never completes without quorum: recovery goes first",
			in: with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) {
				dataGone("c-1", "c-2")(in)
				in.Pending = &Pending{Type: "AddMember", Member: "c-3"}
			}),
			kind: StartRecovery, members: []string{"c-0"}, source: FromSurvivor},
		{name: "paused beats everything",
			in:   with(quorumLost(3, map[string]uint64{"c-0": 90}), func(in *Input) { dataGone("c-1", "c-2")(in); in.Paused = true }),
			kind: Wait, reason: "Paused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Decide(tc.in)
			if a.Kind != tc.kind || (tc.members != nil && !reflect.DeepEqual(a.Members, tc.members)) || a.Source != tc.source ||
				(tc.reason != "" && a.Reason != tc.reason) || !strings.Contains(a.Message, tc.says) || (tc.index != 0 && a.Index != tc.index) {
				t.Fatalf("got %+v\nwant kind %s members %v source %q reason %q message containing %q index %d", a, tc.kind, tc.members, tc.source, tc.reason, tc.says, tc.index)
			}
		})
	}
}

// survivorsCommittedApplied is a five-member cluster whose quorum is gone: c-2, c-3 and c-4 lost
// their data; c-0 knows entries up to 1000 committed but applied only 900 (a slow backend), c-1
// committed and applied 950.
func survivorsCommittedApplied() Input {
	in := with(quorumLost(5, map[string]uint64{"c-0": 900, "c-1": 950}), dataGone("c-2", "c-3", "c-4"))
	in.Survivors[0].CommittedIndex = 1000
	return in
}

// Issue 30 item 1: no survivor's volume goes before the chosen one serves with everything any
// survivor knew committed; the story of one recovery, pass by pass.
func TestRecoveryKeepsSurvivorVolumesUntilTheChosenOneServes(t *testing.T) {
	in := survivorsCommittedApplied()
	start := Decide(in)
	if start.Kind != StartRecovery || !reflect.DeepEqual(start.Members, []string{"c-0"}) || start.Index != 1000 {
		t.Fatalf("start: got %+v, want StartRecovery from c-0 at committed index 1000", start)
	}
	in.Known = in.Known[:1]
	in.Recovery = &Recovery{Source: FromSurvivor, Phase: etcdv1alpha1.RecoveryFencing, Survivor: "c-0", CommittedIndex: start.Index}
	step := func(what string, want Kind, members []string, f func(*Input)) Action {
		t.Helper()
		f(&in)
		a := Decide(in)
		if a.Kind != want || (members != nil && !reflect.DeepEqual(a.Members, members)) {
			t.Fatalf("%s: got %+v, want %s %v", what, a, want, members)
		}
		return a
	}
	step("fencing stops c-1 and keeps its volume", StopMembers, []string{"c-1"}, func(*Input) {})
	step("c-1 stopped: force the new cluster", AdvanceRecovery, []string{"c-0"}, func(in *Input) { delete(in.Pods, "c-1") })
	serving := func(applied uint64) func(*Input) {
		return func(in *Input) {
			in.Recovery.Phase = etcdv1alpha1.RecoveryRestarting
			in.Survivors = nil
			in.Pods["c-0"] = PodState{Exists: true}
			in.Etcd = &Etcd{LeaderID: 1, Members: []EtcdMember{{ID: 1, Name: "c-0", Started: true, Healthy: true, RaftIndex: applied, AppliedIndex: applied}}}
		}
	}
	a := step("c-0 serves below 1000: c-1's volume is kept", Wait, nil, serving(990))
	if a.Reason != reason.RecoveryStuck || !strings.Contains(a.Message, "c-1") || !strings.Contains(a.Message, "1000") {
		t.Fatalf("below the committed index: got %+v, want RecoveryStuck naming c-1 and 1000", a)
	}
	step("c-0 serves with 1000 and more: c-1's volume goes", FenceMembers, []string{"c-1"}, serving(1003))
	step("c-1 fenced: done", FinishRecovery, []string{"c-0"}, func(in *Input) { delete(in.PVCs, "c-1") })
}

func TestRecoverySteps(t *testing.T) {
	// recovering is c-0 recovering from the loss of c-1 and c-2, in phase, with status already
	// trimmed to the survivor.
	recovering := func(phase etcdv1alpha1.RecoveryPhase, f func(*Input)) Input {
		in := quorumLost(3, map[string]uint64{"c-0": 90})
		in.Known = in.Known[:1]
		in.Recovery = &Recovery{Source: FromSurvivor, Phase: phase, Survivor: "c-0"}
		f(&in)
		return in
	}
	alone := func(healthy bool) func(*Input) {
		return func(in *Input) {
			in.Survivors = nil
			in.Etcd = &Etcd{LeaderID: 1, Members: []EtcdMember{{ID: 1, Name: "c-0", Started: true, Healthy: healthy}}}
		}
	}
	pod := func(p PodState) func(*Input) { return func(in *Input) { in.Pods["c-0"] = p } }
	all := func(fs ...func(*Input)) func(*Input) {
		return func(in *Input) {
			for _, f := range fs {
				f(in)
			}
		}
	}
	cases := []struct {
		name    string
		in      Input
		kind    Kind
		members []string
		phase   etcdv1alpha1.RecoveryPhase
		force   bool
	}{
		{name: "fencing stops every other member, keeping its volume", in: recovering(etcdv1alpha1.RecoveryFencing, func(*Input) {}),
			kind: StopMembers, members: []string{"c-1", "c-2"}},
		{name: "fencing does not wait for pods stuck terminating", in: recovering(etcdv1alpha1.RecoveryFencing, func(in *Input) {
			in.Pods["c-1"] = PodState{Exists: true, Deleting: true}
			delete(in.PVCs, "c-1")
			dataGone("c-2")(in)
		}), kind: AdvanceRecovery, phase: etcdv1alpha1.RecoveryForcingNewCluster},
		{name: "fenced: force a new cluster", in: recovering(etcdv1alpha1.RecoveryFencing, dataGone("c-1", "c-2")),
			kind: AdvanceRecovery, members: []string{"c-0"}, phase: etcdv1alpha1.RecoveryForcingNewCluster},
		{name: "from a backup, fencing includes every member", in: recovering(etcdv1alpha1.RecoveryFencing, func(in *Input) {
			in.Recovery = &Recovery{Source: FromBackup, Phase: etcdv1alpha1.RecoveryFencing, Backup: "b"}
		}), kind: FenceMembers, members: []string{"c-0", "c-1", "c-2"}},
		{name: "from a backup, fenced: a new bootstrap", in: recovering(etcdv1alpha1.RecoveryFencing, func(in *Input) {
			in.Recovery = &Recovery{Source: FromBackup, Phase: etcdv1alpha1.RecoveryFencing, Backup: "b"}
			dataGone("c-0", "c-1", "c-2")(in)
		}), kind: RestartFromBackup},
		{name: "the survivor's running pod is restarted", in: recovering(etcdv1alpha1.RecoveryForcingNewCluster, dataGone("c-1", "c-2")),
			kind: RollMember, members: []string{"c-0"}},
		{name: "its old pod is going", in: recovering(etcdv1alpha1.RecoveryForcingNewCluster, all(dataGone("c-1", "c-2"), pod(PodState{Exists: true, Deleting: true}))),
			kind: Wait},
		{name: "started with --force-new-cluster", in: recovering(etcdv1alpha1.RecoveryForcingNewCluster, all(dataGone("c-1", "c-2"), pod(PodState{}))),
			kind: CreateMembers, members: []string{"c-0"}, force: true},
		{name: "waiting for it to form a one-member cluster", in: recovering(etcdv1alpha1.RecoveryForcingNewCluster, all(dataGone("c-1", "c-2"), pod(PodState{Exists: true, ForceNewCluster: true}))),
			kind: Wait},
		{name: "alone: restart it without the flag", in: recovering(etcdv1alpha1.RecoveryForcingNewCluster, all(dataGone("c-1", "c-2"), pod(PodState{Exists: true, ForceNewCluster: true}), alone(true))),
			kind: AdvanceRecovery, phase: etcdv1alpha1.RecoveryRestarting},
		{name: "the flagged pod is restarted", in: recovering(etcdv1alpha1.RecoveryRestarting, all(dataGone("c-1", "c-2"), pod(PodState{Exists: true, ForceNewCluster: true}), alone(true))),
			kind: RollMember, members: []string{"c-0"}},
		{name: "recreated without the flag", in: recovering(etcdv1alpha1.RecoveryRestarting, all(dataGone("c-1", "c-2"), pod(PodState{}))),
			kind: CreateMembers, members: []string{"c-0"}},
		{name: "not serving yet", in: recovering(etcdv1alpha1.RecoveryRestarting, all(dataGone("c-1", "c-2"), pod(PodState{Exists: true}), alone(false))),
			kind: Wait},
		{name: "serving: done", in: recovering(etcdv1alpha1.RecoveryRestarting, all(dataGone("c-1", "c-2"), pod(PodState{Exists: true}), alone(true))),
			kind: FinishRecovery},
		{name: "the survivor's volume vanished: stuck, says what to do", in: recovering(etcdv1alpha1.RecoveryForcingNewCluster, dataGone("c-0", "c-1", "c-2")),
			kind: Wait},
		{name: "restoring bootstraps under new names", in: recovering(etcdv1alpha1.RecoveryRestoring, func(in *Input) {
			in.Recovery = &Recovery{Source: FromBackup, Phase: etcdv1alpha1.RecoveryRestoring, Backup: "b"}
			in.Known, in.Bootstrapped, in.NextIndex = nil, false, 3
			dataGone("c-0", "c-1", "c-2")(in)
		}), kind: InitBootstrap, members: []string{"c-3", "c-4", "c-5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Decide(tc.in)
			if a.Kind != tc.kind || (tc.members != nil && !reflect.DeepEqual(a.Members, tc.members)) || a.Phase != string(tc.phase) || a.ForceNewCluster != tc.force {
				t.Fatalf("got %+v\nwant kind %s members %v phase %q force %v", a, tc.kind, tc.members, tc.phase, tc.force)
			}
		})
	}
}
