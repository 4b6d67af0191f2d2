package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const sourceCluster = 0xc1

// source is a healthy 3-member running cluster old-0..old-2 (IDs 101..103, old-0 leading) to be
// taken over into 3 members c-0..c-2 at 3.6.16, before the migration is recorded.
func source() Input {
	in := Input{
		Replicas: 3, Now: now, MemberNameFunc: name, TargetVersion: "3.6.16",
		Pods: map[string]PodState{}, PVCs: map[string]PVCState{},
		Etcd:      &Etcd{LeaderID: 101, ClusterID: sourceCluster},
		Migration: &Migration{Endpoints: []string{"http://old:2379"}, Quota: 2 << 30},
	}
	for i := 0; i < 3; i++ {
		in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: uint64(101 + i), Name: fmt.Sprintf("old-%d", i), Started: true, Healthy: true, RaftIndex: 100, Version: "3.6.16"})
	}
	return in
}

// peersOn gives every member of the source a peer URL in scheme.
func peersOn(scheme string) func(*Input) {
	return func(in *Input) {
		for i := range in.Etcd.Members {
			m := &in.Etcd.Members[i]
			m.PeerURLs = []string{fmt.Sprintf("%s://%s:2380", scheme, m.Name)}
		}
	}
}

// started is source() once recorded.
func started() Input {
	return with(source(), func(in *Input) {
		in.Migration = &Migration{Started: true, ClusterID: sourceCluster, Source: []uint64{101, 102, 103}}
	})
}

// joined adds the operator's member c-i (ID 1+i) as a healthy voter with its pod and PVC.
func joined(in *Input, i int, learner bool) {
	nm := name(int32(i))
	in.Known = append(in.Known, KnownMember{Name: nm})
	in.Pods[nm], in.PVCs[nm] = PodState{Exists: true}, PVCState{Exists: true}
	in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: uint64(1 + i), Name: nm, Started: true, Healthy: true, Learner: learner, RaftIndex: 100 + uint64(i)})
	in.NextIndex = int32(i + 1)
}

// allJoined is started() with c-0..c-2 voting.
func allJoined() Input {
	return with(started(), func(in *Input) {
		for i := 0; i < 3; i++ {
			joined(in, i, false)
		}
	})
}

func removeMember(in *Input, id uint64) {
	kept := in.Etcd.Members[:0:0]
	for _, m := range in.Etcd.Members {
		if m.ID != id {
			kept = append(kept, m)
		}
	}
	in.Etcd.Members = kept
}

// fourOfSixDown leaves 2 of the 6 voters of a joined migration healthy: no quorum.
func fourOfSixDown(in *Input) {
	for _, n := range []string{"old-1", "old-2", "c-1", "c-2"} {
		member(in, n).Healthy = false
	}
}

// oursFailingSince has etcd report the operator's member nm failing, observed since since.
func oursFailingSince(in *Input, nm string, since time.Time) {
	m := member(in, nm)
	m.Healthy, m.Failing = false, "the leader has no raft connection to it"
	for i := range in.Known {
		if in.Known[i].Name == nm {
			in.Known[i].FailingSince = &since
		}
	}
}

func TestDecideMigration(t *testing.T) {
	cases := []decideCase{
		// preflight: every refusal changes nothing and says what to fix
		{name: "unreachable source", in: with(source(), func(in *Input) { in.Etcd, in.Migration.Unreachable = nil, "context deadline exceeded" }), kind: Wait, reason: "MigrationSourceUnreachable"},
		{name: "no leader", in: with(source(), func(in *Input) { in.Etcd.LeaderID = 0 }), kind: Wait, reason: "MigrationRefused"},
		{name: "an unhealthy member", in: with(source(), func(in *Input) { member(in, "old-1").Healthy = false }), kind: Wait, reason: "MigrationRefused"},
		{name: "a learner", in: with(source(), func(in *Input) { member(in, "old-2").Learner = true }), kind: Wait, reason: "MigrationRefused"},
		{name: "a member never started", in: with(source(), func(in *Input) { member(in, "old-2").Started = false }), kind: Wait, reason: "MigrationRefused"},
		{name: "an older minor", in: with(source(), func(in *Input) { member(in, "old-0").Version = "3.5.35" }), kind: Wait, reason: "MigrationRefused"},
		{name: "a newer patch", in: with(source(), func(in *Input) { member(in, "old-0").Version = "3.6.17" }), kind: Wait, reason: "MigrationRefused"},
		{name: "authentication on: etcd answers nothing", in: with(source(), func(in *Input) { in.Etcd, in.Migration.AuthEnabled = nil, true }), kind: Wait, reason: "MigrationRefused"},
		{name: "a database our quota cannot hold", in: with(source(), func(in *Input) { member(in, "old-0").DBSize = 2 << 30 }), kind: Wait, reason: "MigrationRefused"},
		{name: "a member named like ours", in: with(source(), func(in *Input) { member(in, "old-2").Name = "c-4" }), kind: Wait, reason: "MigrationRefused"},
		{name: "an older patch is joined", in: with(source(), func(in *Input) { member(in, "old-0").Version = "3.6.4" }), kind: StartMigration, reason: "Migrating"},
		{name: "a healthy source is recorded first", in: source(), kind: StartMigration, reason: "Migrating"},
		{name: "paused takes no step", in: with(source(), func(in *Input) { in.Paused = true }), kind: Wait, reason: "Paused"},
		{name: "adoptObjects: the members are the StatefulSet's pods", in: with(source(), func(in *Input) { in.Migration.StatefulSet = "old" }), kind: StartMigration, reason: "Migrating"},
		{name: "adoptObjects: a member that is no pod of the StatefulSet", in: with(source(), func(in *Input) { in.Migration.StatefulSet = "legacy" }), kind: Wait, reason: "MigrationRefused"},
		{name: "adoptObjects: a name with a non-ordinal suffix", in: with(source(), func(in *Input) {
			in.Migration.StatefulSet = "old"
			member(in, "old-2").Name = "old-x"
		}), kind: Wait, reason: "MigrationRefused"},
		{name: "adoptObjects: a StatefulSet the operator cannot take", in: with(source(), func(in *Input) {
			in.Migration.StatefulSet, in.Migration.StatefulSetProblem = "old", "StatefulSet old is controlled by EtcdCluster legacy"
		}), kind: Wait, reason: "MigrationRefused"},

		// the peers' scheme: plain text is joined as it is, TLS only with the running cluster's CA
		{name: "peers on TLS without the running cluster's CA", in: with(source(), peersOn("https")), kind: Wait, reason: "MigrationRefused"},
		{name: "peers on TLS with the running cluster's CA", in: with(source(), func(in *Input) {
			peersOn("https")(in)
			in.Migration.SourceCA = true
		}), kind: StartMigration, reason: "Migrating"},
		{name: "peers on plain text with a CA (clients on TLS)", in: with(source(), func(in *Input) {
			peersOn("http")(in)
			in.Migration.SourceCA = true
		}), kind: StartMigration, reason: "Migrating"},
		{name: "peers mixing plain text and TLS", in: with(source(), func(in *Input) {
			peersOn("https")(in)
			member(in, "old-1").PeerURLs = []string{"http://old-1:2380"}
			in.Migration.SourceCA = true
		}), kind: Wait, reason: "MigrationRefused"},

		// joining
		{name: "the first member joins as a learner", in: started(), kind: AddLearner, members: []string{"c-0"}, reason: "Migrating"},
		{name: "a recorded addition is finished", in: with(started(), func(in *Input) {
			joined(in, 0, true)
			in.Pending = &Pending{Type: "AddMember", Member: "c-0"}
		}), kind: FinishAdd, members: []string{"c-0"}},
		{name: "the learner's pod is created", in: with(started(), func(in *Input) {
			joined(in, 0, true)
			in.Pods, in.PVCs = map[string]PodState{}, map[string]PVCState{}
			member(in, "c-0").Started, member(in, "c-0").Healthy = false, false
		}), kind: CreateMembers, members: []string{"c-0"}},
		{name: "a learner catching up is waited for", in: with(started(), func(in *Input) {
			joined(in, 0, true)
			member(in, "c-0").Healthy = false
		}), kind: Wait, reason: "Migrating"},
		{name: "a caught-up learner is promoted", in: with(started(), func(in *Input) { joined(in, 0, true) }), kind: Promote, members: []string{"c-0"}, id: 1},
		{name: "the next member joins", in: with(started(), func(in *Input) { joined(in, 0, false) }), kind: AddLearner, members: []string{"c-1"}},
		{name: "a member never added is forgotten", in: with(started(), func(in *Input) {
			joined(in, 0, false)
			removeMember(in, 1)
		}), kind: ForgetMember, members: []string{"c-0"}},

		// handing over
		{name: "leadership moves to ours before any old member goes", in: allJoined(), kind: MoveLeader, id: 3, reason: "Migrating"},
		{name: "old members are removed one at a time", in: with(allJoined(), func(in *Input) { in.Etcd.LeaderID = 1 }), kind: RemoveMember, members: []string{"old-0"}, id: 101},
		{name: "a recorded removal is retried", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID = 1
			in.Pending = &Pending{Type: "RemoveMember", Member: "old-0", ID: 101}
		}), kind: RemoveMember, members: []string{"old-0"}, id: 101},
		{name: "a made removal is finished", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID = 1
			removeMember(in, 101)
			in.Pending = &Pending{Type: "RemoveMember", Member: "old-0", ID: 101}
		}), kind: FinishRemove, members: []string{"old-0"}},
		{name: "the next old member", in: with(allJoined(), func(in *Input) { in.Etcd.LeaderID = 1; removeMember(in, 101) }), kind: RemoveMember, members: []string{"old-1"}, id: 102},
		{name: "no old member left: done", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID = 1
			removeMember(in, 101)
			removeMember(in, 102)
			removeMember(in, 103)
		}), kind: CompleteMigration, reason: "Migrating"},

		// stopping
		{name: "quorum lost mid-migration: stop, never recover the source", in: with(allJoined(), func(in *Input) { in.Etcd = nil; in.QuorumLoss = FromSurvivor }), kind: Wait, reason: "MigrationStopped"},
		{name: "an old member down: no removal", in: with(allJoined(), func(in *Input) { in.Etcd.LeaderID = 1; member(in, "old-2").Healthy = false }), kind: Wait, reason: "MigrationStopped"},
		{name: "a survivor still answers the member list without quorum: stopped, not waiting on one member", in: with(allJoined(), fourOfSixDown), kind: Wait, reason: "MigrationStopped"},
		{name: "one of ours down: no removal", in: with(allJoined(), func(in *Input) { in.Etcd.LeaderID = 1; member(in, "c-2").Healthy = false }), kind: Wait, reason: "Migrating"},
		// Issue 30 item 5: one of the operator's own members lost for good is replaced through the
		// same quorum rules as outside a migration, never waited for.
		{name: "one of ours lost its data: removed so that a new member replaces it", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID = 101
			dataGone("c-1")(in)
			member(in, "c-1").Healthy = false
		}), kind: RemoveMember, members: []string{"c-1"}, id: 2, reason: "MemberDataLost"},
		{name: "a learner of ours lost its data: removed", in: with(started(), func(in *Input) {
			joined(in, 0, true)
			dataGone("c-0")(in)
			member(in, "c-0").Healthy = false
		}), kind: RemoveMember, members: []string{"c-0"}, id: 1, reason: "MemberDataLost"},
		{name: "its removal made: the lost member is deleted", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID = 101
			dataGone("c-1")(in)
			removeMember(in, 2)
			in.Pending = &Pending{Type: "RemoveMember", Member: "c-1", ID: 2}
		}), kind: FinishRemove, members: []string{"c-1"}},
		{name: "removed and forgotten: a new member joins in its place", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID = 101
			removeMember(in, 2)
			in.Known = []KnownMember{{Name: "c-0"}, {Name: "c-2"}}
			dataGone("c-1")(in)
		}), kind: AddLearner, members: []string{"c-3"}},
		{name: "one of ours lost its data while a majority is unhealthy: stopped, with the way out", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID = 101
			dataGone("c-1")(in)
			for _, n := range []string{"c-1", "c-2", "old-1", "old-2"} {
				member(in, n).Healthy = false
			}
		}), kind: Wait, reason: "MigrationStopped"},
		{name: "one of ours failing for long: replaced", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID, in.ReplaceAfter = 101, 5*time.Minute
			oursFailingSince(in, "c-1", now.Add(-6*time.Minute))
		}), kind: RemoveMember, members: []string{"c-1"}, id: 2, reason: "MemberUnhealthy"},
		{name: "one of ours failing, not for long yet: waited for", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID, in.ReplaceAfter = 101, 5*time.Minute
			oursFailingSince(in, "c-1", now.Add(-time.Minute))
		}), kind: Wait, reason: "Migrating"},
		{name: "an old member failing for long is the old side's: stopped, never removed", in: with(allJoined(), func(in *Input) {
			in.Etcd.LeaderID, in.ReplaceAfter = 1, 5*time.Minute
			member(in, "old-1").Healthy, member(in, "old-1").Failing = false, "the leader has no raft connection to it"
		}), kind: Wait, reason: "MigrationStopped"},
		{name: "a stranger joined", in: with(allJoined(), func(in *Input) {
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 999, Name: "intruder", Started: true, Healthy: true})
		}), kind: Wait, reason: "MigrationStopped"},
		{name: "the endpoints lead to another cluster", in: with(allJoined(), func(in *Input) { in.Etcd.ClusterID = 0xdead }), kind: Wait, reason: "MigrationStopped"},
	}
	runDecideCases(t, cases)

	if a := Decide(with(source(), func(in *Input) { in.Migration.StatefulSet = "legacy" })); !strings.Contains(a.Message, "old-0 is not a pod of StatefulSet legacy") {
		t.Fatalf("a foreign member reported as %q", a.Message)
	}
	lostOurs := with(allJoined(), func(in *Input) {
		dataGone("c-1")(in)
		fourOfSixDown(in)
	})
	if a := Decide(lostOurs); !strings.Contains(a.Message, "the data of c-1 is lost") || !strings.Contains(a.Message, "etcdctl member remove 2") || !strings.Contains(a.Message, "spec.maintenance.paused") {
		t.Fatalf("one of ours lost without quorum reported as %q", a.Message)
	}
	if a := Decide(with(allJoined(), fourOfSixDown)); !strings.Contains(a.Message, "no quorum (2 of 6 voting members healthy)") {
		t.Fatalf("a lost quorum reported as %q", a.Message)
	}
}

// TestMigrationWalk walks a whole migration, one decided step at a time, from a 3-member source into
// 1 to 7 members: only old members are removed, never the leader, one at a time, and the migration
// ends with the operator's members only, as many as spec.replicas.
// A refusal over the peers' scheme says what to do about it.
func TestPeerSchemeRefusalsSayWhatToDo(t *testing.T) {
	noCA := Decide(with(source(), peersOn("https")))
	if !strings.Contains(noCA.Message, "set spec.bootstrap.migrateFrom.caSecret") || !strings.Contains(noCA.Message, "https://old-") {
		t.Errorf("TLS peers without a CA: %q", noCA.Message)
	}
	mixed := Decide(with(source(), func(in *Input) {
		peersOn("https")(in)
		member(in, "old-1").PeerURLs = []string{"http://old-1:2380"}
		in.Migration.SourceCA = true
	}))
	if !strings.Contains(mixed.Message, "mix plain text (old-1 at http://old-1:2380) and TLS") {
		t.Errorf("mixed peers: %q", mixed.Message)
	}
}

func TestMigrationWalk(t *testing.T) {
	for _, replicas := range []int32{1, 3, 5, 7} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			in := with(started(), func(in *Input) { in.Replicas = replicas })
			next := uint64(1)
			for step := 0; ; step++ {
				if step > 100 {
					t.Fatal("the migration does not end")
				}
				a := Decide(in)
				switch a.Kind {
				case AddLearner:
					nm := a.Members[0]
					in.Known = append(in.Known, KnownMember{Name: nm})
					in.Pods[nm], in.PVCs[nm] = PodState{Exists: true}, PVCState{Exists: true}
					in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: next, Name: nm, Started: true, Healthy: true, Learner: true})
					in.NextIndex++
					next++
				case Promote:
					member(&in, a.Members[0]).Learner = false
				case MoveLeader:
					in.Etcd.LeaderID = a.ID
				case RemoveMember:
					if !strings.HasPrefix(a.Members[0], "old-") {
						t.Fatalf("removed %s, one of ours", a.Members[0])
					}
					removeMember(&in, a.ID)
					if a.ID == in.Etcd.LeaderID {
						t.Fatal("removed the leader")
					}
					voters, _ := countRoles(in.Etcd.Members)
					if voters < 1 {
						t.Fatal("no voter left")
					}
				case CompleteMigration:
					for _, m := range in.Etcd.Members {
						if in.Migration.isSource(m.ID) {
							t.Fatalf("completed with %s still in", m.Name)
						}
					}
					if voters, _ := countRoles(in.Etcd.Members); int32(voters) != replicas {
						t.Fatalf("completed with %d voters, want %d", voters, replicas)
					}
					return
				default:
					t.Fatalf("step %d: unexpected %s (%s: %s)", step, a.Kind, a.Reason, a.Message)
				}
			}
		})
	}
}

// After a take-over with adoptObjects the old StatefulSet is deleted before anything else, once no
// membership call is pending, whatever the cluster's health: its pods are no members any more.
func TestOldStatefulSetIsDeletedAfterTheTakeOver(t *testing.T) {
	complete := func(in *Input) {
		in.Migration = nil
		in.Bootstrapped = true
		in.Etcd.LeaderID = 1
		for _, id := range []uint64{101, 102, 103} {
			removeMember(in, id)
		}
		in.OldStatefulSet = "old"
	}
	runDecideCases(t, []decideCase{
		{name: "deleted", in: with(allJoined(), complete), kind: DeleteOldStatefulSet, members: []string{"old"}, reason: "Migrated"},
		{name: "also with a member down", in: with(allJoined(), func(in *Input) { complete(in); member(in, "c-1").Healthy = false }), kind: DeleteOldStatefulSet, members: []string{"old"}},
		{name: "a pending call first", in: with(allJoined(), func(in *Input) {
			complete(in)
			in.Pending = &Pending{Type: "RemoveMember", Member: "old-2", ID: 103}
		}), kind: FinishRemove, members: []string{"old-2"}},
		{name: "recorded: nothing more", in: with(allJoined(), func(in *Input) { complete(in); in.OldStatefulSet = "" }), kind: None},
		{name: "paused", in: with(allJoined(), func(in *Input) { complete(in); in.Paused = true }), kind: Wait, reason: "Paused"},
	})
}
