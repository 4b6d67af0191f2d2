package resources

import v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"

// Migrating says whether c is taking over a running cluster (spec.bootstrap.migrateFrom) and has
// not finished: its members then share the cluster with old members the operator does not run.
func Migrating(c *v1.EtcdCluster) bool {
	return c.Spec.Bootstrap != nil && c.Spec.Bootstrap.MigrateFrom != nil &&
		(c.Status.Migration == nil || c.Status.Migration.Phase != v1.MigrationComplete)
}
