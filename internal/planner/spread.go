package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// SpreadVerdict says whether losing any one node, or any one zone, costs the cluster more members
// than the placement has to.
type SpreadVerdict struct {
	// Known is false while a member has no pod on a node yet: nothing is said until every member is placed.
	Known bool
	// Spread is false when members share a node (ByZone false), or a zone holds more members than an
	// even spread over the zones members can run in would put there (ByZone true).
	Spread  bool
	ByZone  bool
	Message string
}

// Zones is what the nodes say about zones: the zone of each node (topology.kubernetes.io/zone; a
// node without the label is absent), the zones that have a Ready node open to new pods, and since
// when each open zone has had one (the earliest Ready transition of its open nodes).
type Zones struct {
	Of        map[string]string
	Open      []string
	OpenSince map[string]time.Time
}

// Spread judges the placement of the members' pods (member name -> node name, "" while unscheduled).
// The default placement asks for a node per member where there are enough nodes, and prefers a zone
// per member (internal/resources); this reports what came of it, because a cluster whose members
// share a node or a zone loses them together, and a user who sees only Available cannot tell.
//
// Zones are judged only when every member's node has one and there are at least two to spread over
// (those of the members and the open ones): then the members must be spread evenly, no zone holding
// two more than another. A zone without an open node does not count while it holds no member, so a
// cluster doubled up in the zones that are left after a zone went down is as spread as it can be.
func Spread(nodeOf map[string]string, zones Zones) SpreadVerdict {
	if len(nodeOf) == 0 {
		return SpreadVerdict{}
	}
	byNode := map[string][]string{}
	for m, n := range nodeOf {
		if n == "" {
			return SpreadVerdict{}
		}
		byNode[n] = append(byNode[n], m)
	}
	total := len(nodeOf)
	if node, most := crowded(byNode); len(most) > 1 {
		return SpreadVerdict{Known: true, Message: fmt.Sprintf(
			"%s run on node %s: losing that node loses %d of %d members, and %s (%d nodes hold the %d members; a member gets a node of its own when one it may run on is free when it is created)",
			strings.Join(most, " and "), node, len(most), total, lossOf(len(most), total), len(byNode), total)}
	}
	byZone, ok := membersByZone(nodeOf, zones)
	if !ok {
		return SpreadVerdict{Known: true, Spread: true, Message: fmt.Sprintf("each of the %d members runs on a node of its own", total)}
	}
	zone, most := crowded(byZone)
	emptiest := zone
	for z, ms := range byZone {
		if len(ms) < len(byZone[emptiest]) || len(ms) == len(byZone[emptiest]) && z < emptiest {
			emptiest = z
		}
	}
	if len(most)-len(byZone[emptiest]) > 1 {
		return SpreadVerdict{Known: true, ByZone: true, Message: fmt.Sprintf(
			"%s run in zone %s: losing that zone loses %d of %d members, and %s, while zone %s holds %d (the members can run in %d zones); a member moves to another zone only with a fresh volume",
			strings.Join(most, " and "), zone, len(most), total, lossOf(len(most), total), emptiest, len(byZone[emptiest]), len(byZone))}
	}
	names := make([]string, 0, len(byZone))
	for z := range byZone {
		names = append(names, z)
	}
	slices.Sort(names)
	return SpreadVerdict{Known: true, Spread: true, ByZone: true, Message: fmt.Sprintf(
		"each of the %d members runs on a node of its own, spread evenly over zones %s", total, strings.Join(names, ", "))}
}

// membersByZone groups the members by the zone of their node, with an empty group for each open zone
// that holds none; ok is false when a member's node has no zone or there is only one zone.
func membersByZone(nodeOf map[string]string, zones Zones) (map[string][]string, bool) {
	byZone := map[string][]string{}
	for m, n := range nodeOf {
		z, ok := zones.Of[n]
		if !ok || z == "" {
			return nil, false
		}
		byZone[z] = append(byZone[z], m)
	}
	for _, z := range zones.Open {
		if _, ok := byZone[z]; !ok {
			byZone[z] = nil
		}
	}
	return byZone, len(byZone) > 1
}

// crowded is the group with the most members (the first by name among equals), its members sorted.
func crowded(groups map[string][]string) (string, []string) {
	worst := ""
	for g, ms := range groups {
		slices.Sort(ms)
		if worst == "" || len(ms) > len(groups[worst]) || len(ms) == len(groups[worst]) && g < worst {
			worst = g
		}
	}
	return worst, groups[worst]
}

// lossOf says what losing lost of total members leaves.
func lossOf(lost, total int) string {
	if total-lost < total/2+1 {
		return "the rest are no quorum"
	}
	return "the others keep the quorum"
}
