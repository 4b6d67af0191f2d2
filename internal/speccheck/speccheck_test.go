package speccheck

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func fields(ps []v1.FieldProblem) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Field)
	}
	return strings.Join(out, ",")
}

func TestCluster(t *testing.T) {
	ok := func(mutate func(*v1.EtcdCluster)) *v1.EtcdCluster {
		c := &v1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd"}}
		c.Spec.Replicas = 3
		c.Spec.Storage.Size = resource.MustParse("1Gi")
		c.Spec.Etcd.AutoCompactionMode, c.Spec.Etcd.AutoCompactionRetention = "periodic", "1h"
		if mutate != nil {
			mutate(c)
		}
		return c
	}
	cases := []struct {
		name string
		c    *v1.EtcdCluster
		want string
	}{
		{"valid", ok(nil), ""},
		{"stored before upgradeTimeout existed", ok(func(c *v1.EtcdCluster) { c.Spec.Maintenance.UpgradeTimeout = "" }), ""},
		{"name of 56 characters, as an older operator could run", ok(func(c *v1.EtcdCluster) { c.Name = "a" + strings.Repeat("b", 55) }), ""},
		{"revision compaction with the retention the CRD writes in (1h: the operator keeps 10000)", ok(func(c *v1.EtcdCluster) { c.Spec.Etcd.AutoCompactionMode = "revision" }), ""},
		{"retention in hours, as etcd reads it", ok(func(c *v1.EtcdCluster) { c.Spec.Etcd.AutoCompactionRetention = "2" }), ""},
		{"undecodable fields", ok(func(c *v1.EtcdCluster) {
			c.Stored = &v1.StoredSpec{Problems: []v1.FieldProblem{{Field: "spec.storage.size", Message: "x"}}}
		}), "spec.storage.size"},
		{"name too long for a Service", ok(func(c *v1.EtcdCluster) { c.Name = "a" + strings.Repeat("b", 56) }), "metadata.name"},
		{"name with a dot", ok(func(c *v1.EtcdCluster) { c.Name = "a.b" }), "metadata.name"},
		{"storage 1e100", ok(func(c *v1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("1e100") }), "spec.storage.size"},
		{"upgradeTimeout forever", ok(func(c *v1.EtcdCluster) { c.Spec.Maintenance.UpgradeTimeout = "forever" }), "spec.maintenance.upgradeTimeout"},
		{"replaceFailedMemberAfter forever", ok(func(c *v1.EtcdCluster) { c.Spec.Maintenance.ReplaceFailedMemberAfter = "forever" }), "spec.maintenance.replaceFailedMemberAfter"},
		{"slow member after forever", ok(func(c *v1.EtcdCluster) { c.Spec.Maintenance.SlowMemberReplacement.After = "forever" }), "spec.maintenance.slowMemberReplacement.after"},
		{"slow member policy unknown", ok(func(c *v1.EtcdCluster) { c.Spec.Maintenance.SlowMemberReplacement.Policy = "Evict" }), "spec.maintenance.slowMemberReplacement.policy"},
		{"stored before slowMemberReplacement existed", ok(func(c *v1.EtcdCluster) { c.Spec.Maintenance.SlowMemberReplacement = v1.SlowMemberReplacementSpec{} }), ""},
		{"upgradeTimeout negative", ok(func(c *v1.EtcdCluster) { c.Spec.Maintenance.UpgradeTimeout = "-1s" }), "spec.maintenance.upgradeTimeout"},
		{"revision retention as a duration", ok(func(c *v1.EtcdCluster) {
			c.Spec.Etcd.AutoCompactionMode, c.Spec.Etcd.AutoCompactionRetention = "revision", "90m"
		}), "spec.etcd.autoCompactionRetention"},
		{"periodic retention junk", ok(func(c *v1.EtcdCluster) { c.Spec.Etcd.AutoCompactionRetention = "often" }), "spec.etcd.autoCompactionRetention"},
		{"restore without a source", ok(func(c *v1.EtcdCluster) { c.Spec.Bootstrap = &v1.BootstrapSpec{Restore: &v1.RestoreSpec{}} }), "spec.bootstrap.restore"},
		{"restore source without a destination", ok(func(c *v1.EtcdCluster) {
			c.Spec.Bootstrap = &v1.BootstrapSpec{Restore: &v1.RestoreSpec{Source: &v1.BackupDestination{}}}
		}), "spec.bootstrap.restore.source"},
		{"migrateFrom into plain text", ok(func(c *v1.EtcdCluster) { migrateFrom(c, "http://old:2379") }), ""},
		{"migrateFrom without endpoints", ok(func(c *v1.EtcdCluster) { migrateFrom(c) }), "spec.bootstrap.migrateFrom.endpoints"},
		{"migrateFrom adoptObjects without a StatefulSet", ok(func(c *v1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.Bootstrap.MigrateFrom.AdoptObjects = true
		}), "spec.bootstrap.migrateFrom"},
		{"migrateFrom adopting its StatefulSet", ok(func(c *v1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.Bootstrap.MigrateFrom.AdoptObjects, c.Spec.Bootstrap.MigrateFrom.StatefulSetName = true, "old"
		}), ""},
		{"migrateFrom into TLS", ok(func(c *v1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.TLS = v1.TLSSpec{Client: v1.TLSOperatorManaged, Peer: v1.TLSOperatorManaged}
		}), ""},
		{"migrateFrom into user-provided TLS", ok(func(c *v1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.TLS = v1.TLSSpec{Client: v1.TLSUserProvided, Peer: v1.TLSUserProvided, Secrets: &v1.TLSSecrets{Server: "s", OperatorClient: "o", Peer: "p"}}
		}), "spec.tls"},
		{"migrateFrom and restore", ok(func(c *v1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.Bootstrap.Restore = &v1.RestoreSpec{BackupName: "b"}
		}), "spec.bootstrap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Cluster(tc.c)
			if fields(got) != tc.want {
				t.Fatalf("problems %v; want fields %q", got, tc.want)
			}
			for _, p := range got {
				if p.Message == "" {
					t.Errorf("%s has no message", p.Field)
				}
			}
		})
	}
}

func TestScheduleAndBackup(t *testing.T) {
	sched := func(mutate func(*v1.EtcdBackupSchedule)) *v1.EtcdBackupSchedule {
		s := &v1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
		s.Spec.Schedule = "0 2 * * *"
		s.Spec.Template.Destination.S3 = &v1.S3Destination{Bucket: "b", CredentialsSecret: "c"}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	cases := []struct {
		name string
		s    *v1.EtcdBackupSchedule
		want string
	}{
		{"valid", sched(nil), ""},
		{"maxAge forever", sched(func(s *v1.EtcdBackupSchedule) { s.Spec.MaxAge = "forever" }), "spec.maxAge"},
		{"maxAge zero", sched(func(s *v1.EtcdBackupSchedule) { s.Spec.MaxAge = "0s" }), "spec.maxAge"},
		{"minute 61", sched(func(s *v1.EtcdBackupSchedule) { s.Spec.Schedule = "61 * * * *" }), "spec.schedule"},
		{"never fires", sched(func(s *v1.EtcdBackupSchedule) { s.Spec.Schedule = "0 0 30-31 2 *" }), "spec.schedule"},
		{"fortnightly verify", sched(func(s *v1.EtcdBackupSchedule) { s.Spec.Verify = &v1.VerifySpec{Schedule: "@fortnightly"} }), "spec.verify.schedule"},
		{"name beyond a label value", sched(func(s *v1.EtcdBackupSchedule) { s.Name = strings.Repeat("n", 64) }), "metadata.name"},
		{"template without destination", sched(func(s *v1.EtcdBackupSchedule) { s.Spec.Template.Destination.S3 = nil }), "spec.template.destination"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Schedule(tc.s); fields(got) != tc.want {
				t.Fatalf("problems %v; want fields %q", got, tc.want)
			}
		})
	}
	b := &v1.EtcdBackup{}
	if got := fields(Backup(b)); got != "spec.destination" {
		t.Errorf("backup without destination: %q", got)
	}
	b.Spec.Destination.PVC = &v1.PVCDestination{ClaimName: "p"}
	if got := Backup(b); len(got) != 0 {
		t.Errorf("valid backup: %v", got)
	}
}

func migrateFrom(c *v1.EtcdCluster, endpoints ...string) {
	c.Spec.TLS = v1.TLSSpec{Client: v1.TLSDisabled, Peer: v1.TLSDisabled}
	c.Spec.Bootstrap = &v1.BootstrapSpec{MigrateFrom: &v1.MigrateFromSpec{Endpoints: endpoints}}
}
