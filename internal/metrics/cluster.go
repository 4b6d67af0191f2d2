package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Cluster is what one reconcile pass knows of one EtcdCluster, in the shape of its metrics. The
// reconciler fills it from status and its observation (a pure function there); SetCluster writes it.
type Cluster struct {
	Namespace, Name string
	Desired         int
	// Voting and Ready count voting members in etcd's member list, and those healthy.
	Voting, Ready, Learners int
	// Leader is the leader's member ID, 0 when none is known.
	Leader     uint64
	QuotaBytes int64
	// Alarms counts raised alarms by type.
	Alarms                         map[string]int
	CurrentVersion, DesiredVersion string
	Upgrading, Downgrading         bool
	UpgradeBlocked                 bool
	PendingOperation               bool
	// Conditions by type: status and reason.
	Conditions []Condition
	// CertificateExpiry is each TLS Secret's certificate expiry, in Unix seconds, by Secret name.
	CertificateExpiry map[string]int64
	Members           []Member
}

// Condition is one status condition.
type Condition struct {
	Type, Reason string
	True         bool
}

// Member is one member as observed; Answered is false when it did not report its status.
type Member struct {
	Name                string
	Healthy, Leader     bool
	Learner, Answered   bool
	Slow                bool
	DBSize, DBSizeInUse int64
	RaftIndex           uint64
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetCluster writes one cluster's gauges and counts a leader change since its last call.
func SetCluster(c Cluster) {
	mu.Lock()
	defer mu.Unlock()
	key := [2]string{c.Namespace, c.Name}
	st := clusters[key]
	if st == nil {
		st = &state{}
		clusters[key] = st
		LeaderChanges.WithLabelValues(c.Namespace, c.Name).Add(0) // present from the start, so rate() sees the first change
	}
	if c.Leader != 0 && st.leader != 0 && c.Leader != st.leader {
		LeaderChanges.WithLabelValues(c.Namespace, c.Name).Inc()
	}
	if c.Leader != 0 {
		st.leader = c.Leader
	}
	series := map[*prometheus.GaugeVec][][]string{}
	set := func(v *prometheus.GaugeVec, value float64, labels ...string) {
		labels = append([]string{c.Namespace, c.Name}, labels...)
		v.WithLabelValues(labels...).Set(value)
		series[v] = append(series[v], labels)
	}
	set(MembersDesired, float64(c.Desired))
	set(MembersVoting, float64(c.Voting))
	set(MembersReady, float64(c.Ready))
	set(Learners, float64(c.Learners))
	set(HasLeader, b2f(c.Leader != 0))
	set(QuorumMargin, float64(c.Ready-(c.Voting/2+1)))
	set(Quota, float64(c.QuotaBytes))
	types := []string{"NOSPACE", "CORRUPT"}
	for t := range c.Alarms {
		if t != "NOSPACE" && t != "CORRUPT" {
			types = append(types, t)
		}
	}
	for _, t := range types {
		set(Alarms, float64(c.Alarms[t]), t)
	}
	set(VersionInfo, 1, c.CurrentVersion, c.DesiredVersion)
	set(Upgrading, b2f(c.Upgrading))
	set(Downgrading, b2f(c.Downgrading))
	set(UpgradeBlocked, b2f(c.UpgradeBlocked))
	set(PendingOp, b2f(c.PendingOperation))
	for _, cond := range c.Conditions {
		set(Conditions, b2f(cond.True), cond.Type, cond.Reason)
	}
	for secret, notAfter := range c.CertificateExpiry {
		set(CertificateExpiry, float64(notAfter), secret)
	}
	var top uint64
	for _, m := range c.Members {
		if m.Answered && m.RaftIndex > top {
			top = m.RaftIndex
		}
	}
	for _, m := range c.Members {
		set(MemberHealthy, b2f(m.Healthy), m.Name)
		set(MemberIsLeader, b2f(m.Leader), m.Name)
		set(MemberIsLearner, b2f(m.Learner), m.Name)
		set(MemberSlow, b2f(m.Slow), m.Name)
		if !m.Answered {
			continue // no size or index to report: its series go rather than stay at a stale value
		}
		set(MemberDBSize, float64(m.DBSize), m.Name)
		set(MemberDBInUse, float64(m.DBSizeInUse), m.Name)
		if c.QuotaBytes > 0 {
			set(MemberQuotaUsage, float64(m.DBSize)/float64(c.QuotaBytes), m.Name)
		}
		set(MemberRaftLag, float64(top-m.RaftIndex), m.Name)
	}
	// Delete the series written last time and not this time.
	for v, old := range st.series {
		for _, labels := range old {
			if !contains(series[v], labels) {
				v.DeleteLabelValues(labels...)
			}
		}
	}
	st.series = series
}

func contains(sets [][]string, labels []string) bool {
	for _, s := range sets {
		if slices.Equal(s, labels) {
			return true
		}
	}
	return false
}
