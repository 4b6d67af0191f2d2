package olmcondition

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func etcd(name string, mutate ...func(*etcdv1alpha1.EtcdCluster)) etcdv1alpha1.EtcdCluster {
	c := etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	c.Spec.Version = "3.6.16"
	c.Status.Bootstrapped = true
	c.Status.CurrentVersion = "3.6.16"
	for _, m := range mutate {
		m(&c)
	}
	return c
}

func upgrading(c *etcdv1alpha1.EtcdCluster) {
	c.Spec.Version = "3.7.0"
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionUpgrading, Status: metav1.ConditionTrue, Reason: "Upgrading"}}
}

func downgrading(c *etcdv1alpha1.EtcdCluster) {
	c.Spec.Version, c.Status.DowngradeTarget = "3.5.21", "3.5.0"
}

func restoring(c *etcdv1alpha1.EtcdCluster) {
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "b1"}}
	c.Status.Bootstrapped = false
}

func recovering(c *etcdv1alpha1.EtcdCluster) {
	c.Status.Recovery = &etcdv1alpha1.QuorumRecovery{Source: "FromSurvivor", Phase: "ForcingNewCluster"}
}

func TestUpgradeable(t *testing.T) {
	cases := []struct {
		name     string
		clusters []etcdv1alpha1.EtcdCluster
		status   metav1.ConditionStatus
		reason   string
		names    []string // in the message
	}{
		{"no clusters", nil, metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"idle clusters", []etcdv1alpha1.EtcdCluster{etcd("a"), etcd("b")}, metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"upgrade done (Upgrading False)", []etcdv1alpha1.EtcdCluster{etcd("a", func(c *etcdv1alpha1.EtcdCluster) {
			c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionUpgrading, Status: metav1.ConditionFalse, Reason: "UpToDate"}}
		})}, metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"upgrade failed and rolled back (Upgrading False)", []etcdv1alpha1.EtcdCluster{etcd("a", func(c *etcdv1alpha1.EtcdCluster) {
			c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionUpgrading, Status: metav1.ConditionFalse, Reason: "UpgradeFailed"}}
		})}, metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"upgrading", []etcdv1alpha1.EtcdCluster{etcd("a"), etcd("b", upgrading)}, metav1.ConditionFalse, ReasonVersionChange, []string{"ns/b (etcd version change)"}},
		{"downgrade enabled", []etcdv1alpha1.EtcdCluster{etcd("a", downgrading)}, metav1.ConditionFalse, ReasonVersionChange, []string{"ns/a"}},
		{"restore under way", []etcdv1alpha1.EtcdCluster{etcd("r", restoring)}, metav1.ConditionFalse, ReasonRestore, []string{"ns/r (restore)"}},
		{"restored cluster, bootstrapped", []etcdv1alpha1.EtcdCluster{etcd("r", restoring, func(c *etcdv1alpha1.EtcdCluster) { c.Status.Bootstrapped = true })},
			metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"quorum recovery", []etcdv1alpha1.EtcdCluster{etcd("q", recovering)}, metav1.ConditionFalse, ReasonQuorumRecovery, []string{"ns/q (quorum recovery)"}},
		{"recovery complete", []etcdv1alpha1.EtcdCluster{etcd("q", func(c *etcdv1alpha1.EtcdCluster) {
			c.Status.Recovery = &etcdv1alpha1.QuorumRecovery{Source: "FromSurvivor", Phase: etcdv1alpha1.RecoveryComplete}
		})}, metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"migration refused at its preflight holds nothing", []etcdv1alpha1.EtcdCluster{etcd("m", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: []string{"http://old:2379"}}}
		})}, metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"migration joining", []etcdv1alpha1.EtcdCluster{etcd("m", migrating(etcdv1alpha1.MigrationJoining, ""))}, metav1.ConditionFalse, ReasonMigration, []string{"ns/m (migration)"}},
		{"migrated, peer URLs moving to TLS", []etcdv1alpha1.EtcdCluster{etcd("m", migrating(etcdv1alpha1.MigrationComplete, etcdv1alpha1.PeerTLSUpdating))}, metav1.ConditionFalse, ReasonMigration, []string{"ns/m (migration)"}},
		{"migrated and secured", []etcdv1alpha1.EtcdCluster{etcd("m", migrating(etcdv1alpha1.MigrationComplete, etcdv1alpha1.PeerTLSSecured))}, metav1.ConditionTrue, ReasonUpgradeable, nil},
		{"several kinds", []etcdv1alpha1.EtcdCluster{etcd("u", upgrading), etcd("q", recovering)}, metav1.ConditionFalse, ReasonSeveral,
			[]string{"ns/q (quorum recovery)", "ns/u (etcd version change)"}},
		{"a deleted cluster holds nothing", []etcdv1alpha1.EtcdCluster{etcd("d", upgrading, func(c *etcdv1alpha1.EtcdCluster) { c.DeletionTimestamp = &metav1.Time{} })},
			metav1.ConditionTrue, ReasonUpgradeable, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Upgradeable(tc.clusters)
			if got.Type != "Upgradeable" || got.Status != tc.status || got.Reason != tc.reason {
				t.Fatalf("got %s=%s (%s), want %s (%s): %s", got.Type, got.Status, got.Reason, tc.status, tc.reason, got.Message)
			}
			for _, n := range tc.names {
				if !strings.Contains(got.Message, n) {
					t.Errorf("message %q does not name %q", got.Message, n)
				}
			}
		})
	}
}

func TestUpgradeableMessageIsBounded(t *testing.T) {
	var cs []etcdv1alpha1.EtcdCluster
	for i := range 25 {
		cs = append(cs, etcd(fmt.Sprintf("c%02d", i), upgrading))
	}
	got := Upgradeable(cs)
	if !strings.Contains(got.Message, "ns/c09 ") || strings.Contains(got.Message, "ns/c10 ") || !strings.HasSuffix(got.Message, " and 15 more") {
		t.Fatalf("message: %q", got.Message)
	}
}

func migrating(phase, peerTLS string) func(*etcdv1alpha1.EtcdCluster) {
	return func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: []string{"http://old:2379"}}}
		c.Status.Migration = &etcdv1alpha1.Migration{Phase: phase, PeerTLS: peerTLS}
	}
}
