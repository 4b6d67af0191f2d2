package etcdcluster

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// clusterMetrics is the metrics view of a pass: status as this pass set it, plus what only the
// observation holds (database sizes and raft indexes left status so that they cost no API writes).
func clusterMetrics(c *etcdv1alpha1.EtcdCluster, o *observation) metrics.Cluster {
	m := metrics.Cluster{
		Namespace: c.Namespace, Name: c.Name, Desired: int(c.Spec.Replicas),
		QuotaBytes:     resources.Quota(c),
		CurrentVersion: c.Status.CurrentVersion, DesiredVersion: c.Spec.Version,
		Upgrading:        meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionUpgrading),
		Downgrading:      c.Status.DowngradeTarget != "",
		UpgradeBlocked:   c.Status.UpgradeBlocked != nil,
		PendingOperation: c.Status.PendingOperation != nil,
		Alarms:           map[string]int{},
	}
	for _, cert := range c.Status.TLS.Certificates {
		if m.CertificateExpiry == nil {
			m.CertificateExpiry = map[string]int64{}
		}
		m.CertificateExpiry[cert.Secret] = cert.NotAfter.Unix()
	}
	for _, cond := range c.Status.Conditions {
		m.Conditions = append(m.Conditions, metrics.Condition{Type: cond.Type, Reason: cond.Reason, True: cond.Status == metav1.ConditionTrue})
	}
	if o.etcd != nil {
		m.Leader = o.leaderID
		for _, a := range o.alarms {
			m.Alarms[a.Type]++
		}
	}
	for _, ms := range c.Status.Members {
		mm := metrics.Member{Name: ms.Name, Healthy: ms.Healthy, Leader: ms.Role == etcdv1alpha1.RoleLeader, Learner: ms.Role == etcdv1alpha1.RoleLearner, Slow: ms.SlowSince != nil}
		switch ms.Role {
		case etcdv1alpha1.RoleLearner:
			m.Learners++
		case etcdv1alpha1.RoleLeader, etcdv1alpha1.RoleFollower:
			m.Voting++
			if ms.Healthy {
				m.Ready++
			}
		}
		if id, ok := o.ids[ms.Name]; ok && o.etcd != nil {
			if st, answered := o.status[id]; answered {
				mm.Answered, mm.DBSize, mm.DBSizeInUse, mm.RaftIndex = true, st.DBSize, st.DBSizeInUse, st.RaftIndex
			}
		}
		m.Members = append(m.Members, mm)
	}
	if o.etcd == nil {
		// Nothing answered, so roles are unknown: every member etcd ever listed counts as voting and
		// none as ready, so the quorum margin is negative rather than that of an empty, healthy cluster.
		for _, ms := range c.Status.Members {
			if ms.ID != "" {
				m.Voting++
			}
		}
	}
	return m
}
