package resources

import (
	"strings"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// Migrating says whether c is taking over a running cluster (spec.bootstrap.migrateFrom) and has
// not finished: its members then share the cluster with old members the operator does not run.
func Migrating(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Spec.Bootstrap != nil && c.Spec.Bootstrap.MigrateFrom != nil &&
		(c.Status.Migration == nil || c.Status.Migration.Phase != etcdv1alpha1.MigrationComplete)
}

// SourceCASecret is the Secret with the CA of a running cluster taken over with TLS
// (migrateFrom.caSecret), "" when there is none.
func SourceCASecret(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.MigrateFrom == nil {
		return ""
	}
	return c.Spec.Bootstrap.MigrateFrom.CASecret
}

// SourcePeerTLS says whether the cluster c took over talked TLS between its members: every old
// member's peer URL, as recorded at the start of the take-over, is https. c's members then join over
// TLS, with certificates of that cluster's CA (SourceCASecret).
func SourcePeerTLS(c *etcdv1alpha1.EtcdCluster) bool {
	mg := c.Status.Migration
	if mg == nil || len(mg.SourceMembers) == 0 {
		return false
	}
	for _, m := range mg.SourceMembers {
		for _, u := range m.PeerURLs {
			if !strings.HasPrefix(u, "https://") {
				return false
			}
		}
	}
	return true
}

// PeerTLSUnsettled says whether c takes over a cluster, ends with peer TLS, and has not yet recorded
// every member on a TLS peer URL (status.migration.peerTLS Secured).
func PeerTLSUnsettled(c *etcdv1alpha1.EtcdCluster) bool {
	if !PeerTLS(c) || c.Spec.Bootstrap == nil || c.Spec.Bootstrap.MigrateFrom == nil {
		return false
	}
	return c.Status.Migration == nil || c.Status.Migration.PeerTLS != etcdv1alpha1.PeerTLSSecured
}

// JoinPlainPeer says whether c's members join with a plain-text peer URL (naming.PlainPeerURL): c
// takes over a plain-text cluster and ends with peer TLS, and old members are still in.
func JoinPlainPeer(c *etcdv1alpha1.EtcdCluster) bool {
	return Migrating(c) && PlainPeerListener(c)
}

// PlainPeerListener says whether c's members also listen for peers in plain text on
// naming.PlainPeerPort: from the start of a take-over of a plain-text cluster into peer TLS until
// every member's peer URL is TLS (status.migration.peerTLS Secured).
func PlainPeerListener(c *etcdv1alpha1.EtcdCluster) bool {
	return PeerTLSUnsettled(c) && !SourcePeerTLS(c)
}

// PeerCommonNameCheck says whether c's members accept only peer certificates with the operator's
// peer common name. Not while a cluster with peer TLS is taken over: the old members present
// certificates of their own making, until they are gone and every peer URL is recorded TLS.
func PeerCommonNameCheck(c *etcdv1alpha1.EtcdCluster) bool {
	return !PeerTLSUnsettled(c) || !SourcePeerTLS(c)
}

// MemberPeerURL is the peer URL a member of c is added with and advertises when it joins.
func MemberPeerURL(c *etcdv1alpha1.EtcdCluster, member string) string {
	if JoinPlainPeer(c) {
		return naming.PlainPeerURL(c.Name, c.Namespace, member)
	}
	return naming.PeerURL(c.Name, c.Namespace, member, PeerTLS(c))
}
