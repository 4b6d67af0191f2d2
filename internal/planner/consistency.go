package planner

import (
	"fmt"
	"sort"
	"strings"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// MemberHash is what one member answered to HashKV at a check's revision.
type MemberHash struct {
	Member string
	// Voter: the member votes (learners are judged, but never count toward the majority).
	Voter bool
	Hash  uint32
	// CompactRevision is the compaction the hash was computed after: hashes after different
	// compactions cover different histories and cannot be compared.
	CompactRevision int64
}

// HashCheck is one round of the operator's consistency check: every member that answered HashKV at
// Revision, the lowest revision all members hold.
type HashCheck struct {
	Revision int64
	// Voters is the number of voting members in etcd's member list, answered or not: a majority is
	// one of the cluster, not of those who answered.
	Voters int
	Hashes []MemberHash
	// Refused are the members whose etcd refused to start because its initial corruption check found
	// their key space differing from a peer's: they cannot answer, and etcd's refusal is the evidence.
	Refused []RefusedMember
}

// RefusedMember is a member whose etcd refused to start on its initial corruption check.
type RefusedMember struct {
	Member string
	Voter  bool
	// Said is etcd's error.
	Said string
}

// Verdict is what a HashCheck shows.
type Verdict struct {
	// Diverged names each member whose hash differs from the one a strict majority of the voting
	// members agree on, with that majority's hash; empty when there is no such member.
	Diverged map[string]uint32
	// Majority is the hash a strict majority of the voters agree on; set with Agreed or Diverged.
	Majority uint32
	Agreed   bool
	// Split: the answers differ and no hash has a strict majority of the voters behind it. Nobody can
	// say which data is right; the operator reports and never acts on it.
	Split bool
	// Inconclusive says why the answers cannot be compared ("" when they can): hashes after different
	// compactions, or too few answers for a majority. Another round decides.
	Inconclusive string
	// Evidence is the check in words: the revision and every member's hash.
	Evidence string
}

// JudgeHashes compares the members' hashes of one round. A member is named diverged only on a strict
// majority of all voting members agreeing on another hash: with 3 voters, two members that agree
// against a third name it; one answer against another (the third silent) names nobody.
// A member etcd refused to start (Refused) differs from at least one peer, by etcd's check; it is
// named (with hash 0: it cannot be asked) only when every other voting member answered with the
// majority's hash, for then it differs from all of them. A refusal caused by a peer that is silent or
// differs itself names nobody.
func JudgeHashes(c HashCheck) Verdict {
	hs := append([]MemberHash(nil), c.Hashes...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].Member < hs[j].Member })
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%s=%d", h.Member, h.Hash)
		if !h.Voter {
			parts[i] += " (learner)"
		}
	}
	v := Verdict{Evidence: fmt.Sprintf("HashKV at revision %d: %s", c.Revision, strings.Join(parts, ", "))}
	for _, h := range hs {
		if h.CompactRevision != hs[0].CompactRevision {
			v.Inconclusive = fmt.Sprintf("the members hashed after different compactions (%s at %d, %s at %d)", hs[0].Member, hs[0].CompactRevision, h.Member, h.CompactRevision)
			return v
		}
	}
	votes := map[uint32]int{}
	distinct := map[uint32]bool{}
	for _, h := range hs {
		distinct[h.Hash] = true
		if h.Voter {
			votes[h.Hash]++
		}
	}
	need := quorum(c.Voters)
	for hash, n := range votes {
		if c.Voters > 0 && n >= need {
			v.Majority = hash
			for _, h := range hs {
				if h.Hash != hash {
					if v.Diverged == nil {
						v.Diverged = map[string]uint32{}
					}
					v.Diverged[h.Member] = h.Hash
				}
			}
			judgeRefused(&v, c, n)
			v.Agreed = len(v.Diverged) == 0
			return v
		}
	}
	if len(distinct) > 1 {
		v.Split = true
		return v
	}
	answered := 0
	for _, n := range votes {
		answered += n
	}
	v.Inconclusive = fmt.Sprintf("%d of %d voting members answered; %d agreeing are needed", answered, c.Voters, need)
	return v
}

// DivergedPolicy is spec.maintenance.divergedMember.
type DivergedPolicy struct {
	// Rebuild: a diverged member is removed and replaced from its peers; otherwise it is only
	// contained and reported.
	Rebuild bool
}

// decideDiverged rebuilds a member recorded as diverged (Input.Diverged) the way a failed member is
// replaced: removed through safeRemoval (never below quorum: the diverged member itself counts as
// one of the voters lost; the leader moved away first), after which its pod and volume are deleted
// (FinishRemove) and a new learner, on a fresh volume, is added and promoted by the scaling rules. It
// needs no grace period: the member is already out of the client Service, and the majority's
// agreement is the evidence.
func decideDiverged(in Input, e *Etcd) (Action, bool) {
	if !in.Diverged.Rebuild {
		return Action{}, false
	}
	for _, k := range in.Known {
		evidence, diverged := in.DivergedMembers[k.Name]
		if !diverged {
			continue
		}
		m, ok := findByName(e.Members, k.Name)
		if !ok {
			continue
		}
		msg := fmt.Sprintf("the data of %s diverged from the majority's (%s); rebuilding it from its peers", k.Name, evidence)
		if a, ok := safeRemoval(in, m, reason.MemberDiverged, msg); ok {
			return a, true
		}
	}
	return Action{}, false
}

// judgeRefused adds c's refused members to v.Diverged when every other voter agreed on v.Majority
// (agreeing of them).
func judgeRefused(v *Verdict, c HashCheck, agreeing int) {
	if len(c.Refused) == 0 {
		return
	}
	refusedVoters := 0
	for _, r := range c.Refused {
		if r.Voter {
			refusedVoters++
		}
	}
	for _, r := range c.Refused {
		if agreeing != c.Voters-refusedVoters {
			v.Evidence += fmt.Sprintf("; etcd refused to start %s (%s), but not every other voting member agrees, so it is not named", r.Member, r.Said)
			continue
		}
		if v.Diverged == nil {
			v.Diverged = map[string]uint32{}
		}
		v.Diverged[r.Member] = 0
		v.Evidence += fmt.Sprintf("; etcd refused to start %s: %s", r.Member, r.Said)
	}
}
