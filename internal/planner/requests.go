package planner

import (
	"fmt"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// RequestOutcome is what becomes of a request annotation (move-leader, defragment, recover-quorum)
// this pass. A request that is done, or can never be, is removed so that it never fires later by
// surprise.
type RequestOutcome int

const (
	// RequestStands: the annotation stays; what it asks for is carried out, or waits.
	RequestStands RequestOutcome = iota
	// RequestFulfilled: what it asked for is done; the annotation is removed with a Normal event.
	RequestFulfilled
	// RequestRefused: it can never apply; the annotation is removed with a Warning event saying why.
	RequestRefused
	// RequestSuperseded: what it asked for is under way already; the annotation is removed quietly.
	RequestSuperseded
)

// RequestSettlement is the decision on one request annotation.
type RequestSettlement struct {
	Outcome RequestOutcome
	// Request is what the planner is to carry out while the annotation stands (Input.LeaderRequested,
	// Input.RecoveryRequested); "" for nothing.
	Request string
	// Message is the event's, for RequestFulfilled and RequestRefused.
	Message string
}

// Remove says whether the annotation is to be removed.
func (s RequestSettlement) Remove() bool { return s.Outcome != RequestStands }

// SettleLeaderRequest decides on naming.AnnotationMoveLeader, whose value want names the member to
// hand leadership to. It is done once that member leads, and can never be when it names no member or
// a learner; e is what etcd answered (nil: no answer, so the request waits), its members those known
// by the operator's names.
func SettleLeaderRequest(want string, e *Etcd) RequestSettlement {
	if e == nil {
		return RequestSettlement{Request: want}
	}
	m, known := findByName(e.Members, want)
	switch {
	case !known:
		return RequestSettlement{Outcome: RequestRefused, Message: fmt.Sprintf("%s=%q names no member of this cluster; removed", naming.AnnotationMoveLeader, want)}
	case m.Learner:
		return RequestSettlement{Outcome: RequestRefused, Message: fmt.Sprintf("%s=%q names a learner, which cannot lead; removed", naming.AnnotationMoveLeader, want)}
	case m.ID == e.LeaderID:
		return RequestSettlement{Outcome: RequestFulfilled, Message: fmt.Sprintf("%s leads, as %s asked", want, naming.AnnotationMoveLeader)}
	}
	return RequestSettlement{Request: want}
}

// SettleDefragRequest decides on naming.AnnotationDefragment, of value v: it is done once every
// member in e (nil: etcd did not answer) is in done, the members defragmented since it was made.
func SettleDefragRequest(v string, done map[string]bool, e *Etcd) RequestSettlement {
	if e == nil || len(e.Members) == 0 {
		return RequestSettlement{}
	}
	for _, m := range e.Members {
		if !done[m.Name] {
			return RequestSettlement{}
		}
	}
	return RequestSettlement{Outcome: RequestFulfilled, Message: fmt.Sprintf("every member was defragmented, as %s=%q asked", naming.AnnotationDefragment, v)}
}

// SettleRecoveryRequest decides on the manual recovery trigger (RecoverAnnotation), of value v: a
// recovery source. It is superseded while a recovery is under way (recovering), and refused when the
// cluster has quorum (a linearizable member list answered): forcing a cluster that has quorum would
// throw away what its majority holds.
func SettleRecoveryRequest(v string, recovering, quorum bool) RequestSettlement {
	switch {
	case v != FromSurvivor && v != FromBackup:
		return RequestSettlement{Outcome: RequestRefused, Message: fmt.Sprintf("%s=%q is not a recovery source: write %s or %s", RecoverAnnotation, v, FromSurvivor, FromBackup)}
	case recovering:
		return RequestSettlement{Outcome: RequestSuperseded}
	case quorum:
		return RequestSettlement{Outcome: RequestRefused, Message: fmt.Sprintf("the cluster has quorum (a linearizable member list answered); %s is ignored and removed", RecoverAnnotation)}
	}
	return RequestSettlement{Request: v}
}

// decideRequests carries out what a human asked for by annotation (see naming.AnnotationMoveLeader
// and naming.AnnotationDefragment): only once the cluster is healthy and nothing the spec asks for
// is under way, since both are voluntary and the operator's own steps may move leadership too.
func decideRequests(in Input, e *Etcd) (Action, bool) {
	if in.DefragRequested != nil {
		notYet := func(m EtcdMember) bool { return !in.DefragRequested[m.Name] }
		if a, ok := nextDefrag(e, notYet, reason.DefragmentRequested, "as the defragment annotation asks"); ok {
			return a, true
		}
	}
	if in.LeaderRequested == "" {
		return Action{}, false
	}
	to, ok := findByName(e.Members, in.LeaderRequested)
	if !ok || to.Learner || to.ID == e.LeaderID {
		return Action{}, false // SettleLeaderRequest drops a request it cannot honour, or that is done
	}
	from := fmt.Sprintf("%x", e.LeaderID)
	for _, m := range e.Members {
		if m.ID == e.LeaderID {
			from = displayName(m)
		}
	}
	return Action{Kind: MoveLeader, Members: []string{from, to.Name}, ID: to.ID, Reason: reason.LeaderMoveRequested,
		Message: fmt.Sprintf("moving leadership from %s to %s, as the move-leader annotation asks", from, to.Name)}, true
}
