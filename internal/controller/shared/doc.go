// Package shared holds what the three reconcilers (internal/controller/etcdcluster, etcdbackup and
// etcdbackupschedule) have in common: writing status only on change, the conditions and the
// InvalidSpec refusal, the Jobs they run and read reports from, and the backup metrics the cluster
// and backup controllers both keep. The reconcilers import it and never each other.
package shared
