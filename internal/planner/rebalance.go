package planner

import (
	"fmt"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Placement is what the zone rebalance looks at.
type Placement struct {
	// NodeOf maps each member to the node of its pod ("" while it has none).
	NodeOf map[string]string
	Zones  Zones
	// Default: the pod template gives no affinity and no topology spread constraints, so where the
	// members run is the operator's to correct. A user's placement always wins.
	Default bool
	// ZoneSettle is how long a zone must have had a Ready node open to the members before a member
	// is moved into it (0: DefaultZoneSettle).
	ZoneSettle time.Duration
}

func (p Placement) zoneSettle() time.Duration {
	if p.ZoneSettle > 0 {
		return p.ZoneSettle
	}
	return DefaultZoneSettle
}

// Rebalance is the last zone move recorded (status.zoneRebalance); a zero time is not yet.
type Rebalance struct {
	Zone, Member              string
	Started, Finished, GaveUp time.Time
}

const (
	// DefaultZoneSettle is how long a zone must have had a Ready node open to the members before a
	// member is moved into it, unless the operator is told otherwise (ZONE_SETTLE): a zone that flaps
	// must not make the operator churn members.
	DefaultZoneSettle = 2 * time.Minute
	// RebalanceScheduleTimeout is how long the learner of a zone move may wait for a node in its
	// zone before it is removed; RebalanceStartTimeout, how long its pod may take to start etcd
	// (image pull, volume, a node that died under it) once made.
	RebalanceScheduleTimeout = 5 * time.Minute
	RebalanceStartTimeout    = 15 * time.Minute
	// RebalanceBackoff is how long after a move was given up no new one starts: the zone had no
	// room, and trying again at once would only add and remove learners.
	RebalanceBackoff = 30 * time.Minute
)

// underway: the recorded move's member is still a member, and the move neither finished nor was
// given up.
func (r *Rebalance) underway(known []KnownMember) bool {
	return r != nil && r.Finished.IsZero() && r.GaveUp.IsZero() && isKnown(known, r.Member)
}

// BackingOff says whether a zone move was given up less than RebalanceBackoff before now.
func (r *Rebalance) BackingOff(now time.Time) bool {
	return r != nil && !r.GaveUp.IsZero() && now.Sub(r.GaveUp) < RebalanceBackoff
}

// decideRebalance moves one member back toward one member per zone after a zone outage: the
// replacement made while the zone was down went to a surviving zone, and the default placement
// never moves a running member. The move adds a learner whose pod must run in the emptiest zone
// that has been open for Placement.ZoneSettle; once promoted, the cluster has one voter more than
// spec.replicas and the scale-down removes a member of the most crowded zone (pickRemoval). So
// the voters never drop below spec.replicas, and so never below quorum.
//
// It is called for a steady cluster only (every member a healthy voter, as many as spec.replicas,
// nothing pending), and only under the default placement: with affinity or spread constraints of
// the user's, the placement is the user's choice.
func decideRebalance(in Input) (Action, bool) {
	p := in.Placement
	if !p.Default || in.Rebalance.BackingOff(in.Now) {
		return Action{}, false
	}
	if v := Spread(p.NodeOf, p.Zones); !v.Known || v.Spread || !v.ByZone {
		return Action{}, false
	}
	byZone, _ := membersByZone(p.NodeOf, p.Zones)
	from, crowd := crowded(byZone)
	target := ""
	for _, z := range p.Zones.Open {
		since, ok := p.Zones.OpenSince[z]
		// Only a move that leaves the zones more even than before: the target must hold two fewer.
		if !ok || in.Now.Sub(since) < p.zoneSettle() || len(crowd)-len(byZone[z]) < 2 {
			continue
		}
		if target == "" || len(byZone[z]) < len(byZone[target]) {
			target = z
		}
	}
	if target == "" {
		return Action{}, false
	}
	name := in.MemberNameFunc(in.NextIndex)
	return Action{Kind: AddLearner, Members: []string{name}, Zone: target, Reason: reason.RebalancingZones, Message: fmt.Sprintf(
		"zone %s holds %d members and zone %s %d: adding learner %s, which must run in zone %s; once it votes a member of zone %s is removed",
		from, len(crowd), target, len(byZone[target]), name, target, from)}, true
}

// abandonRebalance removes the learner of a zone move whose pod has waited RebalanceScheduleTimeout
// for a node of its zone (the zone has no room for it, or none the pod may run on), or has not
// started etcd RebalanceStartTimeout after it was made (its node went away under it, say): every
// other step waits while a learner catches up, so a learner that cannot start must not stay. A
// learner does not vote, so removing it is always safe; the move is then given up (RebalanceBackoff).
func abandonRebalance(in Input, e *Etcd) (Action, bool) {
	for _, k := range in.Known {
		m, ok := findByName(e.Members, k.Name)
		pod := in.Pods[k.Name]
		if k.Zone == "" || !ok || !m.Learner || m.Started || !pod.Exists {
			continue
		}
		var why string
		switch {
		case !pod.UnscheduledSince.IsZero() && in.Now.Sub(pod.UnscheduledSince) >= RebalanceScheduleTimeout:
			why = fmt.Sprintf("has found no node in zone %s for %s", k.Zone, RebalanceScheduleTimeout)
		case !pod.Created.IsZero() && in.Now.Sub(pod.Created) >= RebalanceStartTimeout:
			why = fmt.Sprintf("has not started etcd in zone %s within %s", k.Zone, RebalanceStartTimeout)
		default:
			continue
		}
		return safeRemoval(in, m, reason.ZoneRebalanceAbandoned, fmt.Sprintf(
			"the pod of learner %s %s; removing the learner and leaving the zones as they are for %s", k.Name, why, RebalanceBackoff))
	}
	return Action{}, false
}

// zoneNote names the zone of member, when it is known.
func zoneNote(p Placement, member string) string {
	if z := p.Zones.Of[p.NodeOf[member]]; z != "" {
		return " from zone " + z
	}
	return ""
}
