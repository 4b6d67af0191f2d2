package speccheck

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func fields(ps []etcdv1alpha1.FieldProblem) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Field)
	}
	return strings.Join(out, ",")
}

func TestCluster(t *testing.T) {
	ok := func(mutate func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd"}}
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
		c    *etcdv1alpha1.EtcdCluster
		want string
	}{
		{"valid", ok(nil), ""},
		{"stored before upgradeTimeout existed", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.UpgradeTimeout = "" }), ""},
		{"name of 56 characters, as an older operator could run", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Name = "a" + strings.Repeat("b", 55) }), ""},
		{"revision compaction with the retention the CRD writes in (1h: the operator keeps 10000)", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.AutoCompactionMode = "revision" }), ""},
		{"retention in hours, as etcd reads it", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.AutoCompactionRetention = "2" }), ""},
		{"undecodable fields", ok(func(c *etcdv1alpha1.EtcdCluster) {
			c.Stored = &etcdv1alpha1.StoredSpec{Problems: []etcdv1alpha1.FieldProblem{{Field: "spec.storage.size", Message: "x"}}}
		}), "spec.storage.size"},
		{"name too long for a Service", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Name = "a" + strings.Repeat("b", 56) }), "metadata.name"},
		{"name with a dot", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Name = "a.b" }), "metadata.name"},
		{"storage 1e100", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("1e100") }), "spec.storage.size"},
		{"upgradeTimeout forever", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.UpgradeTimeout = "forever" }), "spec.maintenance.upgradeTimeout"},
		{"replaceFailedMemberAfter forever", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.ReplaceFailedMemberAfter = "forever" }), "spec.maintenance.replaceFailedMemberAfter"},
		{"slow member after forever", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.SlowMemberReplacement.After = "forever" }), "spec.maintenance.slowMemberReplacement.after"},
		{"slow member policy unknown", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.SlowMemberReplacement.Policy = "Evict" }), "spec.maintenance.slowMemberReplacement.policy"},
		{"stored before slowMemberReplacement existed", ok(func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance.SlowMemberReplacement = etcdv1alpha1.SlowMemberReplacementSpec{}
		}), ""},
		{"upgradeTimeout negative", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.UpgradeTimeout = "-1s" }), "spec.maintenance.upgradeTimeout"},
		{"revision retention as a duration", ok(func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.AutoCompactionMode, c.Spec.Etcd.AutoCompactionRetention = "revision", "90m"
		}), "spec.etcd.autoCompactionRetention"},
		{"periodic retention junk", ok(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.AutoCompactionRetention = "often" }), "spec.etcd.autoCompactionRetention"},
		{"restore without a source", ok(func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{}}
		}), "spec.bootstrap.restore"},
		{"restore source without a destination", ok(func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{Source: &etcdv1alpha1.BackupDestination{}}}
		}), "spec.bootstrap.restore.source"},
		{"migrateFrom into plain text", ok(func(c *etcdv1alpha1.EtcdCluster) { migrateFrom(c, "http://old:2379") }), ""},
		{"migrateFrom without endpoints", ok(func(c *etcdv1alpha1.EtcdCluster) { migrateFrom(c) }), "spec.bootstrap.migrateFrom.endpoints"},
		{"migrateFrom adoptObjects without a StatefulSet", ok(func(c *etcdv1alpha1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.Bootstrap.MigrateFrom.AdoptObjects = true
		}), "spec.bootstrap.migrateFrom"},
		{"migrateFrom adopting its StatefulSet", ok(func(c *etcdv1alpha1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.Bootstrap.MigrateFrom.AdoptObjects, c.Spec.Bootstrap.MigrateFrom.StatefulSetName = true, "old"
		}), ""},
		{"migrateFrom into TLS", ok(func(c *etcdv1alpha1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged}
		}), ""},
		{"migrateFrom into user-provided TLS", ok(func(c *etcdv1alpha1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", OperatorClient: "o", Peer: "p"}}
		}), "spec.tls"},
		{"migrateFrom and restore", ok(func(c *etcdv1alpha1.EtcdCluster) {
			migrateFrom(c, "http://old:2379")
			c.Spec.Bootstrap.Restore = &etcdv1alpha1.RestoreSpec{BackupName: "b"}
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
	sched := func(mutate func(*etcdv1alpha1.EtcdBackupSchedule)) *etcdv1alpha1.EtcdBackupSchedule {
		s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
		s.Spec.Schedule = "0 2 * * *"
		s.Spec.Template.Destination.S3 = &etcdv1alpha1.S3Destination{Bucket: "b", CredentialsSecret: "c"}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	cases := []struct {
		name string
		s    *etcdv1alpha1.EtcdBackupSchedule
		want string
	}{
		{"valid", sched(nil), ""},
		{"maxAge forever", sched(func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.MaxAge = "forever" }), "spec.maxAge"},
		{"maxAge zero", sched(func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.MaxAge = "0s" }), "spec.maxAge"},
		{"minute 61", sched(func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Schedule = "61 * * * *" }), "spec.schedule"},
		{"never fires", sched(func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Schedule = "0 0 30-31 2 *" }), "spec.schedule"},
		{"fortnightly verify", sched(func(s *etcdv1alpha1.EtcdBackupSchedule) {
			s.Spec.Verify = &etcdv1alpha1.VerifySpec{Schedule: "@fortnightly"}
		}), "spec.verify.schedule"},
		{"name beyond a label value", sched(func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Name = strings.Repeat("n", 64) }), "metadata.name"},
		{"template without destination", sched(func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Template.Destination.S3 = nil }), "spec.template.destination"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Schedule(tc.s); fields(got) != tc.want {
				t.Fatalf("problems %v; want fields %q", got, tc.want)
			}
		})
	}
	b := &etcdv1alpha1.EtcdBackup{}
	if got := fields(Backup(b)); got != "spec.destination" {
		t.Errorf("backup without destination: %q", got)
	}
	b.Spec.Destination.PVC = &etcdv1alpha1.PVCDestination{ClaimName: "p"}
	if got := Backup(b); len(got) != 0 {
		t.Errorf("valid backup: %v", got)
	}
}

func migrateFrom(c *etcdv1alpha1.EtcdCluster, endpoints ...string) {
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: endpoints}}
}
