package plugin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// now is the fixed clock of every rendered example.
var now = time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run KUBEBUILDER_ASSETS=$PWD/bin go test ./internal/plugin -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (rerun with -update after checking it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// healthyCluster is a 3-member cluster as the operator reports it in steady state.
func healthyCluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: "prod", CreationTimestamp: ago(30 * 24 * time.Hour)},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: 3, Version: "3.6.16",
			Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("8Gi")},
		},
		Status: etcdv1alpha1.EtcdClusterStatus{
			Phase: etcdv1alpha1.PhaseRunning, Replicas: 3, ReadyReplicas: 3, CurrentVersion: "3.6.16", Bootstrapped: true,
			Members: []etcdv1alpha1.MemberStatus{
				{Name: "example-0", ID: "8e9e05c52164694d", Version: "3.6.16", Role: etcdv1alpha1.RoleFollower, Healthy: true},
				{Name: "example-1", ID: "91bc3c398fb3c146", Version: "3.6.16", Role: etcdv1alpha1.RoleLeader, Healthy: true},
				{Name: "example-2", ID: "fd422379fda50e48", Version: "3.6.16", Role: etcdv1alpha1.RoleFollower, Healthy: true},
			},
			Conditions: []metav1.Condition{
				condition(etcdv1alpha1.ConditionAvailable, true, reason.QuorumHealthy, "3 of 3 voting members healthy", 29*24*time.Hour),
				condition(etcdv1alpha1.ConditionProgressing, false, reason.Ready, "3/3 members healthy", 3*time.Hour),
				condition(etcdv1alpha1.ConditionDegraded, false, reason.AsExpected, "no member is missing or unhealthy", 29*24*time.Hour),
				condition(etcdv1alpha1.ConditionQuorumLost, false, reason.NoMajorityLost, "no majority of the voting members has lost its data", 30*24*time.Hour),
				condition(etcdv1alpha1.ConditionUpgrading, false, reason.UpToDate, "every member runs 3.6.16", 12*24*time.Hour),
			},
			Endpoints: etcdv1alpha1.Endpoints{ClientService: "example-client.prod.svc:2379", CASecret: "example-ca", ClientSecret: "example-client-tls"},
			TLS: etcdv1alpha1.TLSStatus{Certificates: []etcdv1alpha1.CertificateStatus{
				{Secret: "example-ca", NotAfter: metav1.NewTime(time.Date(2031, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-client-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-operator-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-peer-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-server-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
			}},
		},
	}
}

func backupOf(name string, created time.Duration, phase etcdv1alpha1.BackupPhase) etcdv1alpha1.EtcdBackup {
	b := etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", CreationTimestamp: ago(created)},
		Spec:       etcdv1alpha1.EtcdBackupSpec{ClusterName: "example"},
		Status:     etcdv1alpha1.EtcdBackupStatus{Phase: phase},
	}
	if phase == etcdv1alpha1.BackupSucceeded {
		b.Status.CompletionTime = ptrTime(ago(created - 40*time.Second))
		b.Status.Revision, b.Status.Size = 48213, 13_002_752
		b.Status.Location = "s3://etcd-backups/prod/prod/example/" + name + "-5f1c9a2e.db"
	}
	return b
}

// condition is one condition as the operator sets it, changed since ago.
func condition(typ string, status bool, why reason.Reason, msg string, since time.Duration) metav1.Condition {
	st := metav1.ConditionFalse
	if status {
		st = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: st, Reason: string(why), Message: msg, LastTransitionTime: ago(since)}
}

// regrowingCluster lost two of three volumes, was recovered from the survivor and grows back: a
// learner was just added, with the operator's record of the call still in status.
func regrowingCluster() *etcdv1alpha1.EtcdCluster {
	c := healthyCluster()
	c.Status.Phase = etcdv1alpha1.PhaseScaling
	c.Status.ReadyReplicas = 1
	c.Status.Members = []etcdv1alpha1.MemberStatus{
		{Name: "example-1", ID: "91bc3c398fb3c146", Version: "3.6.16", Role: etcdv1alpha1.RoleLeader, Healthy: true},
		{Name: "example-3", ID: "2a7f9e1c44d0b713", Version: "3.6.16", Role: etcdv1alpha1.RoleLearner, Healthy: true},
	}
	c.Status.Conditions = []metav1.Condition{
		condition(etcdv1alpha1.ConditionAvailable, true, reason.QuorumHealthy, "1 of 1 voting members healthy", 3*time.Minute),
		condition(etcdv1alpha1.ConditionProgressing, true, reason.MemberAdded, "learner example-3 is in the member list", 20*time.Second),
		condition(etcdv1alpha1.ConditionDegraded, true, reason.MembersUnhealthy, "1 of 3 desired members healthy; learner example-3 is in the member list", 7*time.Minute),
		condition(etcdv1alpha1.ConditionQuorumLost, false, reason.Recovered, "quorum is back: recovered FromSurvivor at 2026-11-23T13:57:00Z", 3*time.Minute),
		condition(etcdv1alpha1.ConditionUpgrading, false, reason.UpToDate, "every member runs 3.6.16", 12*24*time.Hour),
	}
	completed := metav1.NewTime(time.Date(2026, 11, 23, 13, 57, 0, 0, time.UTC))
	c.Status.Recovery = &etcdv1alpha1.QuorumRecovery{
		Source: "FromSurvivor", Phase: etcdv1alpha1.RecoveryComplete, Survivor: "example-1", LostMembers: []string{"example-0", "example-2"},
		Reason:    "2 of 3 voting members lost their data [example-0 example-2]; recovering from example-1, the survivor with the most applied log",
		StartedAt: ago(7 * time.Minute), CompletedAt: &completed,
	}
	c.Status.PendingOperation = &etcdv1alpha1.PendingOperation{Type: "AddMember", Member: "example-3", ID: "2a7f9e1c44d0b713"}
	return c
}

func TestRenderStatus(t *testing.T) {
	backups := []etcdv1alpha1.EtcdBackup{
		backupOf("example-20261122-020000", 36*time.Hour, etcdv1alpha1.BackupSucceeded),
		backupOf("example-20261123-020000", 12*time.Hour, etcdv1alpha1.BackupSucceeded),
		backupOf("example-20261121-020000", 60*time.Hour, etcdv1alpha1.BackupSucceeded),
	}
	var out bytes.Buffer
	archived := etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "example-nightly"}}
	archived.Status.RecoverableWindow = &etcdv1alpha1.RecoverableWindow{EarliestRevision: 1200, EarliestTime: ago(60 * time.Hour), LatestRevision: 98765, LatestTime: ago(3 * time.Minute)}
	schedules := []etcdv1alpha1.EtcdBackupSchedule{{ObjectMeta: metav1.ObjectMeta{Name: "example-weekly"}}, archived}
	if err := renderStatus(&out, healthyCluster(), backups, schedules, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status", out.Bytes())
}

func TestRenderStatusRecovered(t *testing.T) {
	failed := backupOf("example-20261123-135500", 5*time.Minute, etcdv1alpha1.BackupFailed)
	failed.Status.Conditions = []metav1.Condition{condition(etcdv1alpha1.BackupConditionFailed, true, reason.ClusterUnavailable, "no member of example answers", 4*time.Minute)}
	c := regrowingCluster()
	c.Annotations = map[string]string{
		naming.AnnotationDefragment:        "2026-11-23T13:58:00Z",
		naming.AnnotationRenewCertificates: "2026-11-01T09:00:00Z", // handled: not shown
	}
	c.Status.TLS.RenewCertificatesHandled = "2026-11-01T09:00:00Z"
	var out bytes.Buffer
	if err := renderStatus(&out, c, []etcdv1alpha1.EtcdBackup{backupOf("example-20261123-020000", 12*time.Hour, etcdv1alpha1.BackupSucceeded), failed}, nil, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-recovered", out.Bytes())
}

// What the operator recorded as under way is listed, one line each.
func TestOperations(t *testing.T) {
	c := healthyCluster()
	c.Spec.Version = "3.7.3"
	c.Status.UpgradeBlocked = &etcdv1alpha1.UpgradeBlock{Version: "3.7.3", Target: "3.7.3", Member: "example-2"}
	c.Status.DowngradeTarget = "3.5.0"
	c.Annotations = map[string]string{naming.AnnotationMoveLeader: "example-2", naming.AnnotationRotateCA: "now", planner.RecoverAnnotation: planner.FromBackup}
	want := []string{
		"upgrade to 3.7.3 blocked: example-2 failed to run 3.7.3 and was rolled back; change spec.version to try again",
		"downgrade to 3.5.0 enabled in etcd",
		"requested: quorum recovery FromBackup",
		"requested: leadership to example-2",
		"requested: CA rotation (now)",
	}
	if got := operations(c); !reflect.DeepEqual(got, want) {
		t.Errorf("operations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRenderStatusNew(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "dev", CreationTimestamp: ago(3 * time.Second)},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", Maintenance: etcdv1alpha1.MaintenanceSpec{Paused: true}},
	}
	var out bytes.Buffer
	if err := renderStatus(&out, c, nil, nil, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-new", out.Bytes())
}

func TestRenderMembersAndCerts(t *testing.T) {
	c := regrowingCluster()
	c.Status.Members[0].UnhealthySince = ptrTime(ago(6 * time.Minute))
	c.Status.Members[0].Healthy = false
	c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: "example-4"}) // recorded, not added yet
	var out bytes.Buffer
	if err := renderMembers(&out, c, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "members", out.Bytes())
	out.Reset()
	if err := renderCerts(&out, rotatingCluster(), now); err != nil {
		t.Fatal(err)
	}
	golden(t, "certs", out.Bytes())
}

// rotatingCluster is in the second phase of a CA rotation, with its user certificate expired.
func rotatingCluster() *etcdv1alpha1.EtcdCluster {
	c := healthyCluster()
	c.Status.TLS.CARotation = &etcdv1alpha1.CARotation{Phase: etcdv1alpha1.CASignWithNew, Trigger: "2026-11-23T13:40:00Z"}
	c.Status.TLS.Certificates[1].NotAfter = metav1.NewTime(now.Add(-49 * time.Hour))
	return c
}

func TestRestoredCluster(t *testing.T) {
	src := healthyCluster()
	src.Spec.Maintenance.Paused = true
	src.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "older"}}
	b := backupOf("example-20261123-020000", time.Hour, etcdv1alpha1.BackupSucceeded)
	got := restoredCluster(src, &b, "prod", "example-restored")
	if got.Spec.Bootstrap.Restore.BackupName != b.Name || got.Spec.Bootstrap.Restore.Source != nil {
		t.Errorf("bootstrap = %+v, want a restore of %s", got.Spec.Bootstrap.Restore, b.Name)
	}
	if got.Spec.Maintenance.Paused {
		t.Error("the restored cluster is paused: it would never restore")
	}
	if src.Spec.Bootstrap.Restore.BackupName != "older" {
		t.Error("the source cluster's spec was changed")
	}
	if got.Name != "example-restored" || got.Spec.Replicas != 3 || got.Spec.Storage.Size.String() != "8Gi" || got.Status.Phase != "" {
		t.Errorf("got %s with %+v, status %+v: want the source's spec under the new name, no status", got.Name, got.Spec, got.Status)
	}
	b.Status.EtcdVersion = "3.5.35"
	if got := restoredCluster(nil, &b, "prod", "example"); got.Spec.Version != "3.5.35" {
		t.Errorf("without a source cluster the version is %q, want the backup's 3.5.35", got.Spec.Version)
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{byteSize(512), "512 B"},
		{byteSize(13_002_752), "12.4 MiB"},
		{byteSize(3 << 30), "3.0 GiB"},
		{until(now.Add(48*time.Hour), now), "in 2d"},
		{until(now.Add(-49*time.Hour), now), "EXPIRED 2d1h ago"},
		{age(metav1.Time{}, now), "-"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// The plugin's page shows the status golden file: it must be the current output, not a stale copy.
func TestDocsShowCurrentStatusOutput(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubectl-plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "status.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, append([]byte("$ kubectl etcd status example -n prod\n"), want...)) {
		t.Error("docs/kubectl-plugin.md's kubectl etcd status example differs from testdata/status.golden: copy it over")
	}
}
