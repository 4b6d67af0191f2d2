package planner

import (
	"fmt"
	"slices"
	"strings"
)

// SpreadVerdict says whether losing any one node costs the cluster more than one member.
type SpreadVerdict struct {
	// Known is false while a member has no pod on a node yet: nothing is said until every member is placed.
	Known   bool
	Spread  bool
	Message string
}

// Spread judges the placement of the members' pods (member name -> node name, "" while unscheduled).
// The default placement asks for a node per member where there are enough nodes (internal/resources);
// this reports what came of it, because a cluster whose members share a node loses them together, and a
// user who sees only Available cannot tell.
func Spread(nodeOf map[string]string) SpreadVerdict {
	byNode := map[string][]string{}
	for m, n := range nodeOf {
		if n == "" {
			return SpreadVerdict{}
		}
		byNode[n] = append(byNode[n], m)
	}
	if len(nodeOf) == 0 {
		return SpreadVerdict{}
	}
	worst := ""
	for n, ms := range byNode {
		slices.Sort(ms)
		if len(ms) > len(byNode[worst]) || len(ms) == len(byNode[worst]) && n < worst {
			worst = n
		}
	}
	total, most := len(nodeOf), len(byNode[worst])
	if most == 1 {
		return SpreadVerdict{Known: true, Spread: true,
			Message: fmt.Sprintf("each of the %d members runs on a node of its own", total)}
	}
	loss := "the others keep the quorum"
	if total-most < total/2+1 {
		loss = "the rest are no quorum"
	}
	return SpreadVerdict{Known: true, Message: fmt.Sprintf(
		"%s run on node %s: losing that node loses %d of %d members, and %s (%d nodes hold the %d members; a member gets a node of its own when one it may run on is free when it is created)",
		strings.Join(byNode[worst], " and "), worst, most, total, loss, len(byNode), total)}
}
