// Package olmcondition tells OLM (v0) whether replacing the operator now is safe, through the
// OperatorCondition OLM creates for the operator's ClusterServiceVersion: Upgradeable=False holds an
// operator upgrade (OLM does not replace the CSV) while a cluster is in the middle of an operation a new
// operator version should not pick up halfway — an etcd version change, a restore, a quorum recovery,
// a live migration.
// The operator is crash-consistent through each of them, so this is caution, not a correctness need:
// an operator upgrade mid-operation is an untested combination of two versions' plans for one cluster.
//
// OLM injects OPERATOR_CONDITION_NAME into the operator's Deployment and grants its ServiceAccount
// get/update/patch on that one object (a Role named after it); plain kustomize installs and OLM v1 set
// no such variable, and then nothing here runs. What operator-lib's conditions package does, in a few
// lines, without its dependency set.
package olmcondition

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// EnvName is the variable OLM sets to the OperatorCondition's name (the CSV's name).
const EnvName = "OPERATOR_CONDITION_NAME"

// Reasons of the Upgradeable condition. They are OLM's, not an EtcdCluster's: OLM shows them on the
// Subscription and the CSV while it holds an upgrade.
const (
	// ReasonUpgradeable: no managed cluster is mid-operation.
	ReasonUpgradeable = "NoOperationInProgress"
	// ReasonVersionChange: a cluster's members are stepping to a new etcd version (upgrade or downgrade).
	ReasonVersionChange = "EtcdVersionChangeInProgress"
	// ReasonRestore: a cluster is being created from a snapshot (spec.bootstrap.restore).
	ReasonRestore = "RestoreInProgress"
	// ReasonQuorumRecovery: a cluster that lost quorum for good is being rebuilt (status.recovery).
	ReasonQuorumRecovery = "QuorumRecoveryInProgress"
	// ReasonMigration: a running etcd is being taken over (spec.bootstrap.migrateFrom): old members are
	// still in the cluster, or the members' peer URLs are moving to TLS.
	ReasonMigration = "MigrationInProgress"
	// ReasonSeveral: clusters are in more than one of the operations above; the message lists them.
	ReasonSeveral = "EtcdOperationsInProgress"
)

// maxNamed bounds the message: OLM shows it in one line.
const maxNamed = 10

// busy says which operation, if any, a cluster is in the middle of: the reason, or "".
func busy(c *etcdv1alpha1.EtcdCluster) string {
	switch {
	case c.Status.Recovery != nil && c.Status.Recovery.Phase != etcdv1alpha1.RecoveryComplete:
		return ReasonQuorumRecovery
	case c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil && !c.Status.Bootstrapped:
		return ReasonRestore
	case meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionUpgrading) || c.Status.DowngradeTarget != "":
		return ReasonVersionChange
	// Only once started: a take-over refused at its preflight (it waits for the user) holds nothing.
	case c.Status.Migration != nil && (c.Status.Migration.Phase != etcdv1alpha1.MigrationComplete || c.Status.Migration.PeerTLS == etcdv1alpha1.PeerTLSUpdating):
		return ReasonMigration
	}
	return ""
}

var describe = map[string]string{
	ReasonQuorumRecovery: "quorum recovery",
	ReasonRestore:        "restore",
	ReasonVersionChange:  "etcd version change",
	ReasonMigration:      "migration",
}

// Upgradeable decides the Upgradeable condition from the managed clusters: False, naming the clusters
// and what each is doing, while any is mid-operation; True otherwise. Pure, so that it is table-tested.
func Upgradeable(clusters []etcdv1alpha1.EtcdCluster) metav1.Condition {
	var named []string
	reasons := map[string]bool{}
	for i := range clusters {
		c := &clusters[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		if r := busy(c); r != "" {
			reasons[r] = true
			named = append(named, fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, describe[r]))
		}
	}
	if len(named) == 0 {
		return metav1.Condition{Type: "Upgradeable", Status: metav1.ConditionTrue, Reason: ReasonUpgradeable,
			Message: "no managed etcd cluster is mid version change, restore, quorum recovery or migration"}
	}
	slices.Sort(named)
	reason := ReasonSeveral
	if len(reasons) == 1 {
		for r := range reasons {
			reason = r
		}
	}
	more := ""
	if len(named) > maxNamed {
		more = fmt.Sprintf(" and %d more", len(named)-maxNamed)
		named = named[:maxNamed]
	}
	return metav1.Condition{Type: "Upgradeable", Status: metav1.ConditionFalse, Reason: reason,
		Message: "operator upgrades wait until these clusters finish: " + strings.Join(named, ", ") + more}
}
