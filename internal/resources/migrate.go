package resources

import (
	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// Migrating says whether c is taking over a running cluster (spec.bootstrap.migrateFrom) and has
// not finished: its members then share the cluster with old members the operator does not run.
func Migrating(c *v1.EtcdCluster) bool {
	return c.Spec.Bootstrap != nil && c.Spec.Bootstrap.MigrateFrom != nil &&
		(c.Status.Migration == nil || c.Status.Migration.Phase != v1.MigrationComplete)
}

// JoinPlainPeer says whether c's members join with a plain-text peer URL (naming.PlainPeerURL): c
// takes over a plain-text cluster and ends with peer TLS, and old members are still in.
func JoinPlainPeer(c *v1.EtcdCluster) bool {
	return PeerTLS(c) && Migrating(c)
}

// PlainPeerListener says whether c's members also listen for peers in plain text on
// naming.PlainPeerPort: from the start of a take-over into peer TLS until every member's peer URL
// is TLS (status.migration.peerTLS Secured).
func PlainPeerListener(c *v1.EtcdCluster) bool {
	if !PeerTLS(c) || c.Spec.Bootstrap == nil || c.Spec.Bootstrap.MigrateFrom == nil {
		return false
	}
	return c.Status.Migration == nil || c.Status.Migration.PeerTLS != v1.PeerTLSSecured
}

// MemberPeerURL is the peer URL a member of c is added with and advertises when it joins.
func MemberPeerURL(c *v1.EtcdCluster, member string) string {
	if JoinPlainPeer(c) {
		return naming.PlainPeerURL(c.Name, c.Namespace, member)
	}
	return naming.PeerURL(c.Name, c.Namespace, member, PeerTLS(c))
}
