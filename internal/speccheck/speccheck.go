// Package speccheck finds what in a stored object the operator cannot act on: the fields its Go
// type could not decode (v1alpha1.StoredSpec.Problems), and values the controllers parse that do not
// parse. The CRDs reject all of these on write; these checks catch objects stored before a rule
// existed or under a looser CRD, which the controllers then report as InvalidSpec instead of
// acting on. They are deliberately no stricter than what the operator needs: a cluster created
// under an older CRD that the operator can still run is never refused here.
package speccheck

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// MaxStorage is the largest storage.size the CRD accepts.
var MaxStorage = resource.MustParse("64Ti")

// Cluster lists what the operator cannot act on in c.
func Cluster(c *etcdv1alpha1.EtcdCluster) []etcdv1alpha1.FieldProblem {
	var out []etcdv1alpha1.FieldProblem
	if c.Stored != nil {
		out = append(out, c.Stored.Problems...)
	}
	add := func(field, format string, a ...any) {
		out = append(out, etcdv1alpha1.FieldProblem{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	// The Services must be DNS-1035 labels and the next members' pod hostnames DNS labels; the
	// name cannot change, so the way out is a new cluster. One problem is enough to say so.
	member := naming.MemberName(c.Name, c.Status.NextMemberIndex+c.Spec.Replicas)
	for _, n := range []struct {
		name string
		errs []string
	}{
		{naming.ClientService(c.Name), validation.IsDNS1035Label(naming.ClientService(c.Name))},
		{naming.PeerService(c.Name), validation.IsDNS1035Label(naming.PeerService(c.Name))},
		{member, validation.IsDNS1123Label(member)},
	} {
		if len(n.errs) > 0 {
			add("metadata.name", "the derived name %q is invalid (%s); names cannot change: create a cluster named with at most 52 lowercase letters, digits and '-', starting with a letter, and restore a backup into it", n.name, n.errs[0])
			break
		}
	}
	if s := c.Spec.Storage.Size; s.Cmp(MaxStorage) > 0 {
		add("spec.storage.size", "%s is larger than %s; write the size of a real volume, such as 8Gi", s.String(), MaxStorage.String())
	}
	if _, err := c.Spec.Maintenance.UpgradeTimeoutDuration(); err != nil {
		add("spec.maintenance.upgradeTimeout", "%v; write a duration such as 3m, 90s or 1h30m", err)
	}
	if _, err := c.Spec.Maintenance.ReplaceFailedMemberAfterDuration(); err != nil {
		add("spec.maintenance.replaceFailedMemberAfter", "%v; write a duration such as 5m or 1h", err)
	}
	if r := c.Spec.Maintenance.SlowMemberReplacement; r.Policy != "" && r.Policy != etcdv1alpha1.SlowMemberReplace && r.Policy != etcdv1alpha1.SlowMemberReport {
		add("spec.maintenance.slowMemberReplacement.policy", "%q is not a policy; write Replace or Report", r.Policy)
	}
	if _, err := c.Spec.Maintenance.SlowMemberReplacement.AfterDuration(); err != nil {
		add("spec.maintenance.slowMemberReplacement.after", "%v; write a duration such as 30m or 2h", err)
	}
	if err := compactionRetention(c.Spec.Etcd.AutoCompactionMode, c.Spec.Etcd.AutoCompactionRetention); err != nil {
		add("spec.etcd.autoCompactionRetention", "%v", err)
	}
	if b := c.Spec.Bootstrap; b != nil && b.Restore != nil {
		r := b.Restore
		if (r.BackupName == "") == (r.Source == nil) {
			add("spec.bootstrap.restore", "needs exactly one of backupName or source")
		} else if r.Source != nil {
			out = append(out, destination("spec.bootstrap.restore.source", *r.Source)...)
		}
	}
	if b := c.Spec.Bootstrap; b != nil && b.MigrateFrom != nil {
		switch {
		case b.Restore != nil:
			add("spec.bootstrap", "takes restore or migrateFrom, not both")
		case len(b.MigrateFrom.Endpoints) == 0:
			add("spec.bootstrap.migrateFrom.endpoints", "needs at least one client URL of the running cluster, such as http://etcd-0.etcd.default.svc:2379")
		case b.MigrateFrom.AdoptObjects != (b.MigrateFrom.StatefulSetName != ""):
			add("spec.bootstrap.migrateFrom", "adoptObjects and statefulSetName go together: set adoptObjects: true and the name of the old members' StatefulSet in this namespace, or neither")
		case c.Spec.TLS.Client == etcdv1alpha1.TLSUserProvided || c.Spec.TLS.Peer == etcdv1alpha1.TLSUserProvided:
			add("spec.tls", "takes client and peer OperatorManaged or Disabled with bootstrap.migrateFrom: the operator moves a plain-text cluster to TLS with certificates of its own CA only")
		case b.MigrateFrom.CASecret != "" && (c.Spec.TLS.Client != etcdv1alpha1.TLSOperatorManaged || c.Spec.TLS.Peer != etcdv1alpha1.TLSOperatorManaged):
			add("spec.tls", "takes client and peer OperatorManaged with bootstrap.migrateFrom.caSecret: the operator carries on the running cluster's CA, which signs every certificate of the cluster")
		}
		https := 0
		for _, e := range b.MigrateFrom.Endpoints {
			if strings.HasPrefix(e, "https://") {
				https++
			}
		}
		switch {
		case https > 0 && https < len(b.MigrateFrom.Endpoints):
			add("spec.bootstrap.migrateFrom.endpoints", "must all be http:// or all https://: one running cluster serves its clients one way")
		case https > 0 && b.MigrateFrom.CASecret == "":
			add("spec.bootstrap.migrateFrom.caSecret", "is needed with endpoints served over TLS (https://): the Secret with the running cluster's CA certificate and key (ca.crt, ca.key)")
		}
	}
	return out
}

// compactionRetention checks --auto-compaction-retention the way etcd parses it, so a member never
// crash-loops on it: revision mode takes a count, periodic mode hours (an integer) or a duration.
func compactionRetention(mode, retention string) error {
	if retention == "" || mode == etcdv1alpha1.CompactionRevision && retention == etcdv1alpha1.DefaultPeriodicRetention {
		return nil // the default the CRD writes in, whatever the mode: the operator keeps 10000 revisions
	}
	if n, err := strconv.ParseInt(retention, 10, 64); err == nil && n >= 0 {
		return nil
	}
	if mode == "revision" {
		return fmt.Errorf("%q is not a revision count; with autoCompactionMode revision write a non-negative integer such as \"10000\"", retention)
	}
	if d, err := time.ParseDuration(retention); err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration; with autoCompactionMode periodic write one such as 1h or 30m", retention)
	}
	return nil
}

func destination(field string, d etcdv1alpha1.BackupDestination) []etcdv1alpha1.FieldProblem {
	if (d.S3 == nil) == (d.PVC == nil) {
		return []etcdv1alpha1.FieldProblem{{Field: field, Message: "needs exactly one of s3 or pvc"}}
	}
	return nil
}

// Backup lists what the operator cannot act on in b.
func Backup(b *etcdv1alpha1.EtcdBackup) []etcdv1alpha1.FieldProblem {
	var out []etcdv1alpha1.FieldProblem
	if b.Stored != nil {
		out = append(out, b.Stored.Problems...)
	}
	return append(out, destination("spec.destination", b.Spec.Destination)...)
}

// Schedule lists what the operator cannot act on in s.
func Schedule(s *etcdv1alpha1.EtcdBackupSchedule) []etcdv1alpha1.FieldProblem {
	var out []etcdv1alpha1.FieldProblem
	if s.Stored != nil {
		out = append(out, s.Stored.Problems...)
	}
	add := func(field, format string, a ...any) {
		out = append(out, etcdv1alpha1.FieldProblem{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	if errs := validation.IsValidLabelValue(s.Name); len(errs) > 0 {
		add("metadata.name", "%q cannot label the backups it makes (%s); names cannot change: create a schedule named with at most 63 characters", s.Name, errs[0])
	}
	const cronHelp = "; write 5 fields (minute hour day-of-month month day-of-week) such as \"0 */6 * * *\", or @hourly, @daily, @weekly, @monthly, @yearly or @every 6h"
	if _, err := backupschedule.Parse(s.Spec.Schedule); err != nil {
		add("spec.schedule", "%v%s", err, cronHelp)
	}
	if v := s.Spec.Verify; v != nil {
		if _, err := backupschedule.Parse(v.Schedule); err != nil {
			add("spec.verify.schedule", "%v%s", err, cronHelp)
		}
	}
	if _, err := s.Spec.MaxAgeDuration(); err != nil {
		add("spec.maxAge", "%v; write a duration in hours, minutes or seconds such as 720h (Go durations have no days)", err)
	}
	return append(out, destination("spec.template.destination", s.Spec.Template.Destination)...)
}
