package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSetClusterWritesGaugesAndDropsStaleSeries(t *testing.T) {
	c := Cluster{
		Namespace: "ns1", Name: "main", Desired: 3, Voting: 3, Ready: 2, Leader: 0xa, QuotaBytes: 1000,
		Alarms: map[string]int{"NOSPACE": 1}, CurrentVersion: "3.6.16", DesiredVersion: "3.6.16",
		Conditions:        []Condition{{Type: "Degraded", Reason: "MembersUnhealthy", True: true}},
		CertificateExpiry: map[string]int64{"main-ca": 2000000000, "main-peer-tls": 1900000000},
		Members: []Member{
			{Name: "main-0", Healthy: true, Leader: true, Answered: true, DBSize: 500, DBSizeInUse: 200, RaftIndex: 100},
			{Name: "main-1", Healthy: true, Answered: true, DBSize: 250, RaftIndex: 90, Slow: true},
			{Name: "main-2"},
		},
	}
	defer ForgetCluster("ns1", "main")
	SetCluster(c)
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"desired", testutil.ToFloat64(MembersDesired.WithLabelValues("ns1", "main")), 3},
		{"quorum margin", testutil.ToFloat64(QuorumMargin.WithLabelValues("ns1", "main")), 0},
		{"has leader", testutil.ToFloat64(HasLeader.WithLabelValues("ns1", "main")), 1},
		{"NOSPACE", testutil.ToFloat64(Alarms.WithLabelValues("ns1", "main", "NOSPACE")), 1},
		{"CORRUPT", testutil.ToFloat64(Alarms.WithLabelValues("ns1", "main", "CORRUPT")), 0},
		{"quota usage", testutil.ToFloat64(MemberQuotaUsage.WithLabelValues("ns1", "main", "main-0")), 0.5},
		{"raft lag", testutil.ToFloat64(MemberRaftLag.WithLabelValues("ns1", "main", "main-1")), 10},
		{"slow member", testutil.ToFloat64(MemberSlow.WithLabelValues("ns1", "main", "main-1")), 1},
		{"member not slow", testutil.ToFloat64(MemberSlow.WithLabelValues("ns1", "main", "main-0")), 0},
		{"degraded", testutil.ToFloat64(Conditions.WithLabelValues("ns1", "main", "Degraded", "MembersUnhealthy")), 1},
		{"peer certificate expiry", testutil.ToFloat64(CertificateExpiry.WithLabelValues("ns1", "main", "main-peer-tls")), 1900000000},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// main-2 never answered: no size series rather than a zero that looks like an empty database.
	if n := testutil.CollectAndCount(MemberDBSize); n != 2 {
		t.Errorf("db size series = %d, want 2", n)
	}

	// Leadership moves, main-1 is removed, the condition's reason changes.
	c.Leader = 0xb
	c.Members = c.Members[:1]
	c.Conditions = []Condition{{Type: "Degraded", Reason: "AsExpected"}}
	SetCluster(c)
	if v := testutil.ToFloat64(LeaderChanges.WithLabelValues("ns1", "main")); v != 1 {
		t.Errorf("leader changes = %v, want 1", v)
	}
	if n := testutil.CollectAndCount(MemberHealthy); n != 1 {
		t.Errorf("member series after removal = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(Conditions); n != 1 {
		t.Errorf("condition series = %d, want only the new reason", n)
	}
	// No leader for a pass is not a change; the next leader is compared with the last known one.
	c.Leader = 0
	SetCluster(c)
	c.Leader = 0xb
	SetCluster(c)
	if v := testutil.ToFloat64(LeaderChanges.WithLabelValues("ns1", "main")); v != 1 {
		t.Errorf("leader changes = %v, want still 1", v)
	}

	ForgetCluster("ns1", "main")
	for _, v := range All {
		if n := testutil.CollectAndCount(v); n != 0 && !strings.Contains(describe(v), "reconcile") && !strings.Contains(describe(v), "rpc") {
			t.Errorf("%s has %d series after the cluster was deleted", describe(v), n)
		}
	}
}

func TestQuorumMarginIsNegativeWithoutQuorum(t *testing.T) {
	defer ForgetCluster("ns1", "lost")
	SetCluster(Cluster{Namespace: "ns1", Name: "lost", Voting: 5, Ready: 2})
	if v := testutil.ToFloat64(QuorumMargin.WithLabelValues("ns1", "lost")); v != -1 {
		t.Errorf("margin = %v, want -1", v)
	}
}

// describe is a collector's metric description, for test messages.
func describe(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 1)
	go func() { c.Describe(ch); close(ch) }()
	d := <-ch
	for range ch {
	}
	return d.String()
}
