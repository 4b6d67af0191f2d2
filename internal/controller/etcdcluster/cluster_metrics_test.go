package etcdcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
)

func TestClusterMetricsFromStatusAndObservation(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "main"}}
	c.Spec.Replicas, c.Spec.Version = 3, "3.6.16"
	c.Status.CurrentVersion = "3.6.15"
	c.Status.QuotaBackendBytes = 1000
	c.Status.Members = []etcdv1alpha1.MemberStatus{
		{Name: "main-0", ID: "a", Role: etcdv1alpha1.RoleLeader, Healthy: true},
		{Name: "main-1", ID: "b", Role: etcdv1alpha1.RoleFollower, Healthy: false},
		{Name: "main-2", ID: "c", Role: etcdv1alpha1.RoleLearner, Healthy: true},
	}
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionUpgrading, Status: metav1.ConditionTrue, Reason: "Upgrading"}}
	o := &observation{
		etcd:     &etcdclient.Client{},
		leaderID: 0xa,
		ids:      map[string]uint64{"main-0": 0xa, "main-1": 0xb, "main-2": 0xc},
		status:   map[uint64]etcdclient.Status{0xa: {DBSize: 500, RaftIndex: 10}, 0xc: {DBSize: 100, RaftIndex: 7}},
		alarms:   []etcdclient.Alarm{{MemberID: 0xa, Type: "NOSPACE"}},
	}
	m := clusterMetrics(c, o)
	if m.Voting != 2 || m.Ready != 1 || m.Learners != 1 || m.Leader != 0xa || !m.Upgrading || m.Alarms["NOSPACE"] != 1 || m.QuotaBytes != 1000 {
		t.Errorf("got %+v", m)
	}
	if !m.Members[0].Answered || m.Members[0].DBSize != 500 || m.Members[1].Answered || m.Members[2].RaftIndex != 7 {
		t.Errorf("members %+v", m.Members)
	}

	// Nothing answers: every member etcd listed counts as voting, none ready, no leader.
	c.Status.Members[0].Role, c.Status.Members[1].Role, c.Status.Members[2].Role = "", "", ""
	m = clusterMetrics(c, &observation{})
	if m.Voting != 3 || m.Ready != 0 || m.Leader != 0 || m.Members[0].Answered {
		t.Errorf("without etcd: %+v", m)
	}
}
