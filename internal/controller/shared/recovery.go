package shared

import (
	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// Recovering is the quorum-loss recovery under way on c, nil when none is.
func Recovering(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.QuorumRecovery {
	if r := c.Status.Recovery; r != nil && r.Phase != etcdv1alpha1.RecoveryComplete {
		return r
	}
	return nil
}
