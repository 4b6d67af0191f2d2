package planner

import (
	"reflect"
	"strings"
	"testing"
)

func TestJudgeHashes(t *testing.T) {
	voter := func(m string, h uint32) MemberHash {
		return MemberHash{Member: m, Voter: true, Hash: h, CompactRevision: 40}
	}
	learner := func(m string, h uint32) MemberHash { return MemberHash{Member: m, Hash: h, CompactRevision: 40} }
	for _, tc := range []struct {
		name         string
		check        HashCheck
		agreed       bool
		diverged     map[string]uint32
		split        bool
		inconclusive string
	}{
		{"all agree", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 7), voter("b", 7), voter("c", 7)}}, true, nil, false, ""},
		{"two of three agree against the third: it diverged", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 7), voter("b", 7), voter("c", 9)}}, false, map[string]uint32{"c": 9}, false, ""},
		{"the leader can be the one that diverged", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 9), voter("b", 7), voter("c", 7)}}, false, map[string]uint32{"a": 9}, false, ""},
		{"three different hashes in three: no majority, nobody named", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 1), voter("b", 2), voter("c", 3)}}, false, nil, true, ""},
		{"one against one, the third silent: no majority of the cluster, nobody named", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 1), voter("b", 2)}}, false, nil, true, ""},
		{"two agree, the third silent: agreed, the silent one unjudged", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 1), voter("b", 1)}}, true, nil, false, ""},
		{"one answer of three: too few to say anything", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 1)}}, false, nil, false, "1 of 3 voting members answered; 2 agreeing are needed"},
		{"2 against 2 in 5 (one silent): no majority", HashCheck{Revision: 100, Voters: 5, Hashes: []MemberHash{voter("a", 1), voter("b", 1), voter("c", 2), voter("d", 2)}}, false, nil, true, ""},
		{"3 of 5 agree, two diverged the same way: both named", HashCheck{Revision: 100, Voters: 5, Hashes: []MemberHash{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 2), voter("e", 2)}}, false, map[string]uint32{"d": 2, "e": 2}, false, ""},
		{"a learner never makes the majority", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 1), learner("l", 2), voter("b", 2)}}, false, nil, true, ""},
		{"a learner is judged by the voters' majority", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 1), voter("b", 1), voter("c", 1), learner("l", 2)}}, false, map[string]uint32{"l": 2}, false, ""},
		{"one-member cluster agrees with itself", HashCheck{Revision: 100, Voters: 1, Hashes: []MemberHash{voter("a", 1)}}, true, nil, false, ""},
		{"hashes after different compactions are not compared", HashCheck{Revision: 100, Voters: 3, Hashes: []MemberHash{voter("a", 1), voter("b", 1), {Member: "c", Voter: true, Hash: 2, CompactRevision: 41}}}, false, nil, false, "the members hashed after different compactions (a at 40, c at 41)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeHashes(tc.check)
			if v.Agreed != tc.agreed || v.Split != tc.split || v.Inconclusive != tc.inconclusive || !reflect.DeepEqual(v.Diverged, tc.diverged) {
				t.Errorf("verdict %+v, want agreed=%t diverged=%v split=%t inconclusive=%q", v, tc.agreed, tc.diverged, tc.split, tc.inconclusive)
			}
			if !strings.Contains(v.Evidence, "revision 100") {
				t.Errorf("evidence %q does not name the revision", v.Evidence)
			}
			for _, h := range tc.check.Hashes {
				if !strings.Contains(v.Evidence, h.Member+"=") {
					t.Errorf("evidence %q does not name %s's hash", v.Evidence, h.Member)
				}
			}
		})
	}
}

func TestDecideDivergedMember(t *testing.T) {
	rebuild := with(healthyCluster(3), func(in *Input) { in.Diverged = DivergedPolicy{Rebuild: true} })
	diverged := func(names ...string) func(*Input) {
		return func(in *Input) {
			in.DivergedMembers = map[string]string{}
			for _, n := range names {
				in.DivergedMembers[n] = "HashKV at revision 100: c-0=7, c-1=7, c-2=9"
			}
		}
	}
	then := func(fs ...func(*Input)) func(*Input) {
		return func(in *Input) {
			for _, f := range fs {
				f(in)
			}
		}
	}
	runDecideCases(t, []decideCase{
		{"Rebuild removes a diverged follower at once", with(rebuild, diverged("c-2")), RemoveMember, []string{"c-2"}, 3, "MemberDiverged"},
		{"Rebuild moves leadership off a diverged leader first", with(rebuild, diverged("c-0")), MoveLeader, []string{"c-0", "c-1"}, 2, "MemberDiverged"},
		{"Report keeps the member (contained only)", with(healthyCluster(3), diverged("c-2")), None, nil, 0, "Ready"},
		{"never below quorum: another member unhealthy holds the rebuild", with(rebuild, then(diverged("c-2"), func(in *Input) { in.Etcd.Members[1].Healthy = false })),
			Wait, nil, 0, "WaitingForHealth"},
		{"a one-member cluster keeps its only copy", with(with(healthyCluster(1), func(in *Input) { in.Diverged.Rebuild = true }), diverged("c-0")), None, nil, 0, "Ready"},
		{"the removed member's replacement comes next: a new learner", with(rebuild, func(in *Input) {
			in.Known = in.Known[:2]
			in.Etcd.Members = in.Etcd.Members[:2]
			delete(in.Pods, "c-2")
			delete(in.PVCs, "c-2")
		}), AddLearner, []string{"c-3"}, 0, "ScalingUp"},
		{"two diverged in five: one at a time", with(with(healthyCluster(5), func(in *Input) { in.Diverged.Rebuild = true }), diverged("c-3", "c-4")), RemoveMember, []string{"c-3"}, 4, "MemberDiverged"},
		{"a diverged member no longer in etcd is not acted on", with(rebuild, diverged("c-9")), None, nil, 0, "Ready"},
	})
}

func TestJudgeHashesWithARefusedMember(t *testing.T) {
	voter := func(m string, h uint32) MemberHash {
		return MemberHash{Member: m, Voter: true, Hash: h, CompactRevision: -1}
	}
	refused := RefusedMember{Member: "c", Voter: true, Said: "found data inconsistency with peers"}
	for _, tc := range []struct {
		name     string
		check    HashCheck
		diverged map[string]uint32
	}{
		{"both others agree: the refused member is the one that differs",
			HashCheck{Revision: 9, Voters: 3, Hashes: []MemberHash{voter("a", 7), voter("b", 7)}, Refused: []RefusedMember{refused}},
			map[string]uint32{"c": 0}},
		{"one other silent: its data may be what etcd objected to",
			HashCheck{Revision: 9, Voters: 3, Hashes: []MemberHash{voter("a", 7)}, Refused: []RefusedMember{refused}},
			nil},
		{"five voters, one other silent: a majority agrees, but not every other voter",
			HashCheck{Revision: 9, Voters: 5, Hashes: []MemberHash{voter("a", 7), voter("b", 7), voter("d", 7)}, Refused: []RefusedMember{refused}},
			nil},
		{"five voters, every other agrees",
			HashCheck{Revision: 9, Voters: 5, Hashes: []MemberHash{voter("a", 7), voter("b", 7), voter("d", 7), voter("e", 7)}, Refused: []RefusedMember{refused}},
			map[string]uint32{"c": 0}},
		{"the others disagree with each other",
			HashCheck{Revision: 9, Voters: 3, Hashes: []MemberHash{voter("a", 7), voter("b", 8)}, Refused: []RefusedMember{refused}},
			nil},
		{"a refused learner, every voter agrees",
			HashCheck{Revision: 9, Voters: 3, Hashes: []MemberHash{voter("a", 7), voter("b", 7), voter("d", 7)}, Refused: []RefusedMember{{Member: "l", Said: "x"}}},
			map[string]uint32{"l": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeHashes(tc.check)
			if !reflect.DeepEqual(v.Diverged, tc.diverged) {
				t.Fatalf("diverged %v, want %v (%+v)", v.Diverged, tc.diverged, v)
			}
			if tc.diverged != nil && (v.Agreed || !strings.Contains(v.Evidence, "etcd refused to start")) {
				t.Errorf("verdict %+v", v)
			}
		})
	}
}
