package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// Migration is the take-over of a running cluster (spec.bootstrap.migrateFrom), until it completes.
type Migration struct {
	// Started: the source's cluster ID and members are recorded (StartMigration); from then on the
	// operator's members may be in the cluster.
	Started bool
	// ClusterID is the recorded ID of the cluster taken over.
	ClusterID uint64
	// Source are the recorded IDs of the old members, in the order they are removed.
	Source []uint64
	// Endpoints are spec.bootstrap.migrateFrom.endpoints, for messages.
	Endpoints []string
	// Unreachable says why no endpoint answered (when Etcd is nil).
	Unreachable string
	// AuthEnabled: the source has authentication on (observed before the start only).
	AuthEnabled bool
	// Quota is the database quota the operator's members will run with.
	Quota int64
	// StatefulSet is migrateFrom.statefulSetName with adoptObjects: the old members' StatefulSet,
	// deleted once they are out. StatefulSetProblem says why it cannot be (observed before the start).
	StatefulSet, StatefulSetProblem string
	// SourceCA: migrateFrom.caSecret is set, the operator issues its certificates from the running
	// cluster's CA, so its members can join old members that talk TLS to each other.
	SourceCA bool
}

const (
	// StartMigration records the source (ClusterID, its members) before any member is added to it.
	StartMigration Kind = "StartMigration"
	// CompleteMigration records that no old member is left: the cluster is the operator's.
	CompleteMigration Kind = "CompleteMigration"
	// DeleteOldStatefulSet deletes the old members' StatefulSet (migrateFrom.adoptObjects) once they
	// are all out of the cluster, then records it.
	DeleteOldStatefulSet Kind = "DeleteOldStatefulSet"
)

func (m *Migration) isSource(id uint64) bool {
	for _, s := range m.Source {
		if s == id {
			return true
		}
	}
	return false
}

// decideMigration takes over a running cluster: preflight checks, then the operator's members join
// as learners one at a time and are promoted, leadership moves to one of them, and the old members
// are removed one at a time. Every step needs every member healthy, so an old member is never
// removed while the cluster is short of a member, and a lost quorum stops everything.
func decideMigration(in Input) Action {
	mg := in.Migration
	if in.Etcd == nil {
		if !mg.Started && mg.AuthEnabled {
			return Action{Kind: Wait, Reason: reason.MigrationRefused, Message: "authentication is enabled on the cluster and the operator has no user in it: disable it for the migration (etcdctl auth disable) and enable it again afterwards; nothing was changed"}
		}
		if !mg.Started {
			return Action{Kind: Wait, Reason: reason.MigrationSourceUnreachable, Message: fmt.Sprintf("no endpoint of %s answers a member list (%s): check spec.bootstrap.migrateFrom.endpoints and that the cluster has quorum; nothing was changed",
				strings.Join(mg.Endpoints, ", "), mg.Unreachable)}
		}
		return Action{Kind: Wait, Reason: reason.MigrationStopped, Message: fmt.Sprintf("the cluster has no quorum (%s): the migration is stopped and no member is added or removed until a majority of the members is back", mg.Unreachable)}
	}
	if in.Pending != nil {
		return resumePending(in)
	}
	e := in.Etcd
	if !mg.Started {
		return preflight(in, e)
	}
	if e.ClusterID != mg.ClusterID {
		return Action{Kind: Wait, Reason: reason.MigrationStopped, Message: fmt.Sprintf("the endpoints now lead to cluster %x, not %x that the migration started on: the migration is stopped", e.ClusterID, mg.ClusterID)}
	}
	for _, m := range e.Members {
		if !mg.isSource(m.ID) && !isKnown(in.Known, m.Name) {
			return Action{Kind: Wait, Reason: reason.MigrationStopped, Message: fmt.Sprintf("member %s (%x) joined the cluster during the migration and is neither an old member nor one of the operator's: remove it (etcdctl member remove %x) for the migration to go on", displayName(m), m.ID, m.ID)}
		}
	}
	// The operator's members recorded but not in etcd were never added: forget them.
	for _, k := range in.Known {
		if _, ok := findByName(e.Members, k.Name); !ok {
			return Action{Kind: ForgetMember, Members: []string{k.Name}, Reason: reason.MemberNotInCluster, Message: fmt.Sprintf("%s is not in the etcd member list; deleting its pod and volume", k.Name)}
		}
	}
	// One of the operator's members lost for good is replaced as outside a migration: removed under
	// the same quorum rule, then a new member joins in its place (ours < Replicas below). Waiting
	// for it would hold the migration, and the cluster short of a member, for ever.
	for _, k := range in.Known {
		m, _ := findByName(e.Members, k.Name)
		if dataLost(in, k.Name, m) {
			return replaceOurs(in, m, reason.MemberDataLost, fmt.Sprintf("the data of %s is lost with its volume or pod; removing it so that a new member replaces it", k.Name))
		}
	}
	if recreate := podsToRecreate(in, e); len(recreate) > 0 {
		return Action{Kind: CreateMembers, Members: recreate, Version: in.TargetVersion, Reason: reason.Migrating, Message: fmt.Sprintf("starting %v, joining the running cluster", recreate)}
	}
	for _, k := range in.Known {
		m, _ := findByName(e.Members, k.Name)
		if m.Failing != "" && k.FailingSince != nil && in.Now.Sub(*k.FailingSince) >= in.ReplaceAfter {
			return replaceOurs(in, m, reason.MemberUnhealthy, fmt.Sprintf("%s has been failing since %s (%s); replacing it", k.Name, k.FailingSince.UTC().Format(time.RFC3339), m.Failing))
		}
	}
	for _, m := range e.Members {
		if m.Learner && isKnown(in.Known, m.Name) && m.Started && m.Healthy {
			return Action{Kind: Promote, Members: []string{m.Name}, ID: m.ID, Reason: reason.Migrating, Message: fmt.Sprintf("promoting learner %s to a voting member of the running cluster", m.Name)}
		}
	}
	// A member that still answers a member list without quorum (it is served from its own state)
	// must not make a lost quorum look like one unhealthy member.
	voters, healthy := 0, 0
	for _, m := range e.Members {
		if !m.Learner {
			voters++
			if m.Healthy {
				healthy++
			}
		}
	}
	if healthy < quorum(voters) {
		return Action{Kind: Wait, Reason: reason.MigrationStopped, Message: fmt.Sprintf("the cluster has no quorum (%d of %d voting members healthy): the migration is stopped and no member is added or removed until a majority of the members is back", healthy, voters)}
	}
	if !allHealthy(e.Members) || hasLearner(e.Members) {
		if lost := unhealthySource(mg, e.Members); lost != "" {
			return Action{Kind: Wait, Reason: reason.MigrationStopped, Message: fmt.Sprintf("old member %s is unhealthy: the migration waits for every member to be healthy before its next step", lost)}
		}
		return Action{Kind: Wait, Reason: reason.Migrating, Message: fmt.Sprintf("waiting for every member to be healthy (%s)", unhealthyNames(e.Members))}
	}
	ours, sources := 0, []EtcdMember{}
	for _, m := range e.Members {
		if mg.isSource(m.ID) {
			sources = append(sources, m)
		} else {
			ours++
		}
	}
	if int32(ours) < in.Replicas {
		name := in.MemberNameFunc(in.NextIndex)
		return Action{Kind: AddLearner, Members: []string{name}, Reason: reason.Migrating, Message: fmt.Sprintf("adding %s as a learner of the running cluster (%d of %d members joined)", name, ours, in.Replicas)}
	}
	if len(sources) == 0 {
		return Action{Kind: CompleteMigration, Reason: reason.Migrating, Message: fmt.Sprintf("every old member is out of cluster %x; it runs on %d members of this EtcdCluster", e.ClusterID, ours)}
	}
	if mg.isSource(e.LeaderID) {
		to := pickOurs(in, e)
		return Action{Kind: MoveLeader, Members: []string{displayName(leader(e)), to.Name}, ID: to.ID, Reason: reason.Migrating, Message: fmt.Sprintf("moving leadership from old member %s to %s before removing the old members", displayName(leader(e)), to.Name)}
	}
	victim := sourceToRemove(mg, sources)
	a, ok := safeRemoval(in, victim, reason.Migrating, fmt.Sprintf("removing old member %s (%x) from the cluster (%d old members left)", displayName(victim), victim.ID, len(sources)))
	if !ok {
		return Action{Kind: Wait, Reason: reason.MigrationStopped, Message: fmt.Sprintf("removing old member %s would leave fewer healthy voting members than a quorum", displayName(victim))}
	}
	return a
}

// replaceOurs removes m, one of the operator's members lost for good, when that keeps quorum; when it
// does not, the migration stops and says how to get out.
func replaceOurs(in Input, m EtcdMember, why reason.Reason, msg string) Action {
	if a, ok := safeRemoval(in, m, why, msg); ok {
		return a
	}
	return Action{Kind: Wait, Reason: reason.MigrationStopped, Message: fmt.Sprintf("%s, but removing it now would leave fewer healthy voting members than a quorum (%s): "+
		"the migration is stopped. Bring the unhealthy members back and the operator replaces it; if a majority cannot come back, quorum is lost and is the old side's to recover: "+
		"set spec.maintenance.paused to true, recover the old cluster with its own tools, remove this member from it (etcdctl member remove %x), then set spec.maintenance.paused to false",
		msg, unhealthyNames(in.Etcd.Members), m.ID)}
}

// preflight refuses a source the operator cannot take over safely, saying what to fix, and otherwise
// records it.
func preflight(in Input, e *Etcd) Action {
	refuse := func(format string, args ...any) Action {
		return Action{Kind: Wait, Reason: reason.MigrationRefused, Message: fmt.Sprintf(format, args...) + "; nothing was changed"}
	}
	if e.LeaderID == 0 {
		return refuse("the cluster has no leader: it must have quorum to be migrated")
	}
	target, err := versions.Parse(in.TargetVersion)
	if err != nil {
		return refuse("spec.version %q is not a version: %v", in.TargetVersion, err)
	}
	if in.Migration.StatefulSetProblem != "" {
		return refuse("migrateFrom.adoptObjects: %s", in.Migration.StatefulSetProblem)
	}
	ours := map[string]bool{}
	for i := int32(0); i < in.NextIndex+in.Replicas+16; i++ {
		ours[in.MemberNameFunc(i)] = true
	}
	for _, m := range e.Members {
		switch {
		case m.Learner:
			return refuse("member %s (%x) is a learner: promote it (etcdctl member promote %x) or remove it before migrating", displayName(m), m.ID, m.ID)
		case !m.Started:
			return refuse("member %x was added but never started: start it or remove it (etcdctl member remove %x)", m.ID, m.ID)
		case !m.Healthy:
			why := "it does not answer at its client URL"
			if m.Failing != "" {
				why = m.Failing
			}
			return refuse("member %s is unhealthy (%s): every member must be healthy to be migrated", displayName(m), why)
		case ours[m.Name]:
			return refuse("member %s has a name this EtcdCluster gives its own members: create the EtcdCluster under another name", m.Name)
		}
		if msg := versionRefusal(m, target); msg != "" {
			return refuse("%s", msg)
		}
		if sts := in.Migration.StatefulSet; sts != "" && !podOf(sts, m.Name) {
			return refuse("member %s is not a pod of StatefulSet %s (its name is not %s-<ordinal>): with adoptObjects the operator deletes that StatefulSet, which would not stop this member; name the StatefulSet that runs the members, or migrate without adoptObjects", displayName(m), sts, sts)
		}
		if q := in.Migration.Quota; q > 0 && m.DBSize > q*9/10 {
			return refuse("member %s's database is %d bytes, too close to the quota of %d bytes the new members get: raise spec.storage.size (or spec.etcd.quotaBackendBytes), or compact and defragment the running cluster", displayName(m), m.DBSize, q)
		}
	}
	if msg := peerSchemeRefusal(in.Migration, e.Members); msg != "" {
		return refuse("%s", msg)
	}
	var names []string
	for _, m := range e.Members {
		names = append(names, displayName(m))
	}
	return Action{Kind: StartMigration, Reason: reason.Migrating, Message: fmt.Sprintf("taking over cluster %x (members %s)", e.ClusterID, strings.Join(names, ", "))}
}

// peerSchemeRefusal says why the operator's members cannot join members with these peer URLs, ""
// if they can: they join plain-text peers in plain text, and TLS peers over TLS with certificates
// of the running cluster's CA (mg.SourceCA), one scheme for the whole cluster.
func peerSchemeRefusal(mg *Migration, members []EtcdMember) string {
	var plain, secure string
	for _, m := range members {
		for _, u := range m.PeerURLs {
			if strings.HasPrefix(u, "https://") {
				secure = fmt.Sprintf("%s at %s", displayName(m), u)
			} else {
				plain = fmt.Sprintf("%s at %s", displayName(m), u)
			}
		}
	}
	switch {
	case plain != "" && secure != "":
		return fmt.Sprintf("the members' peer URLs mix plain text (%s) and TLS (%s): finish the running cluster's own move to peer TLS first", plain, secure)
	case secure != "" && !mg.SourceCA:
		return fmt.Sprintf("the members talk to each other over TLS (%s): set spec.bootstrap.migrateFrom.caSecret to a Secret with the running cluster's CA (ca.crt, ca.key), from which the operator issues its members' certificates", secure)
	}
	return ""
}

// podOf says whether name is a pod name of StatefulSet sts: sts-<ordinal>.
func podOf(sts, name string) bool {
	ordinal, ok := strings.CutPrefix(name, sts+"-")
	if !ok || ordinal == "" {
		return false
	}
	for _, r := range ordinal {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// decideOldStatefulSet deletes the old members' StatefulSet after a take-over with adoptObjects:
// every old member is out of the cluster by then, so its pods are no longer members, and deleting
// it keeps a restarted one from ever coming back. in.OldStatefulSet is set until it is recorded
// deleted or kept (the controller deletes only the object whose UID the start recorded).
func decideOldStatefulSet(in Input) (Action, bool) {
	if in.OldStatefulSet == "" || in.Pending != nil {
		return Action{}, false
	}
	return Action{Kind: DeleteOldStatefulSet, Members: []string{in.OldStatefulSet}, Reason: reason.Migrated,
		Message: fmt.Sprintf("every old member is out of the cluster: deleting their StatefulSet %s if it is still the one checked before the start (migrateFrom.adoptObjects)", in.OldStatefulSet)}, true
}

// versionRefusal says why a member's version cannot be joined by members of target, "" if it can:
// the operator joins at spec.version, and etcd only mixes patch releases of one minor safely here.
func versionRefusal(m EtcdMember, target versions.Version) string {
	v, err := versions.Parse(m.Version)
	if err != nil {
		return fmt.Sprintf("member %s reports version %q, which the operator cannot read", displayName(m), m.Version)
	}
	switch {
	case v.Major != target.Major || v.Minor < target.Minor:
		return fmt.Sprintf("member %s runs etcd %s, older than the %d.%d of spec.version %s: upgrade the running cluster to %d.%d.%d first (one minor version at a time), or set spec.version to a supported release of %d.%d",
			displayName(m), v, target.Major, target.Minor, target, target.Major, target.Minor, target.Patch, v.Major, v.Minor)
	case v.Minor > target.Minor || v.Patch > target.Patch:
		return fmt.Sprintf("member %s runs etcd %s, newer than spec.version %s: set spec.version to %s or a newer release of %d.%d", displayName(m), v, target, v, v.Major, v.Minor)
	}
	return ""
}

func hasLearner(ms []EtcdMember) bool {
	_, learners := countRoles(ms)
	return learners > 0
}

func unhealthySource(mg *Migration, ms []EtcdMember) string {
	for _, m := range ms {
		if mg.isSource(m.ID) && !m.Healthy {
			return displayName(m)
		}
	}
	return ""
}

func leader(e *Etcd) EtcdMember {
	for _, m := range e.Members {
		if m.ID == e.LeaderID {
			return m
		}
	}
	return EtcdMember{ID: e.LeaderID}
}

// pickOurs is the operator's voting member with the highest raft index: the next leader.
func pickOurs(in Input, e *Etcd) EtcdMember {
	var best EtcdMember
	for _, m := range e.Members {
		if in.Migration.isSource(m.ID) || m.Learner || !m.Healthy {
			continue
		}
		if best.ID == 0 || m.RaftIndex > best.RaftIndex {
			best = m
		}
	}
	return best
}

// sourceToRemove is the first old member, in recorded order, still in the cluster.
func sourceToRemove(mg *Migration, sources []EtcdMember) EtcdMember {
	for _, id := range mg.Source {
		for _, m := range sources {
			if m.ID == id {
				return m
			}
		}
	}
	return sources[0]
}
