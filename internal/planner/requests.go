package planner

import (
	"fmt"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

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
		return Action{}, false // the controller drops a request it cannot honour, or that is done
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
