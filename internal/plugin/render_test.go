package plugin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
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
func healthyCluster() *v1.EtcdCluster {
	return &v1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: "prod", CreationTimestamp: ago(30 * 24 * time.Hour)},
		Spec: v1.EtcdClusterSpec{
			Replicas: 3, Version: "3.6.16",
			Storage: v1.StorageSpec{Size: resource.MustParse("8Gi")},
		},
		Status: v1.EtcdClusterStatus{
			Phase: v1.PhaseRunning, Replicas: 3, ReadyReplicas: 3, CurrentVersion: "3.6.16", Bootstrapped: true,
			Members: []v1.MemberStatus{
				{Name: "example-0", ID: "8e9e05c52164694d", Version: "3.6.16", Role: v1.RoleFollower, Healthy: true},
				{Name: "example-1", ID: "91bc3c398fb3c146", Version: "3.6.16", Role: v1.RoleLeader, Healthy: true},
				{Name: "example-2", ID: "fd422379fda50e48", Version: "3.6.16", Role: v1.RoleFollower, Healthy: true},
			},
			Conditions: []metav1.Condition{
				{Type: v1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Ready", Message: "3/3 members healthy", LastTransitionTime: ago(29 * 24 * time.Hour)},
				{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Ready", Message: "3/3 members healthy", LastTransitionTime: ago(3 * time.Hour)},
				{Type: v1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "Ready", Message: "3/3 members healthy", LastTransitionTime: ago(29 * 24 * time.Hour)},
			},
			Endpoints: v1.Endpoints{ClientService: "example-client.prod.svc:2379", CASecret: "example-ca", ClientSecret: "example-client-tls"},
			TLS: v1.TLSStatus{Certificates: []v1.CertificateStatus{
				{Secret: "example-ca", NotAfter: metav1.NewTime(time.Date(2031, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-client-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-operator-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-peer-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
				{Secret: "example-server-tls", NotAfter: metav1.NewTime(time.Date(2027, 10, 24, 13, 2, 0, 0, time.UTC))},
			}},
		},
	}
}

func backupOf(name string, created time.Duration, phase v1.BackupPhase) v1.EtcdBackup {
	b := v1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", CreationTimestamp: ago(created)},
		Spec:       v1.EtcdBackupSpec{ClusterName: "example"},
		Status:     v1.EtcdBackupStatus{Phase: phase},
	}
	if phase == v1.BackupSucceeded {
		b.Status.CompletionTime = ptrTime(ago(created - 40*time.Second))
		b.Status.Revision, b.Status.Size = 48213, 13_002_752
		b.Status.Location = "s3://etcd-backups/prod/prod/example/" + name + "-5f1c9a2e.db"
	}
	return b
}

// recoveringCluster lost two of three volumes; the operator restarts the survivor and grows back.
func recoveringCluster() *v1.EtcdCluster {
	c := healthyCluster()
	c.Status.Phase = v1.PhaseRecovering
	c.Status.ReadyReplicas = 1
	c.Status.Members = []v1.MemberStatus{
		{Name: "example-1", ID: "91bc3c398fb3c146", Version: "3.6.16", Role: v1.RoleLeader, Healthy: true},
		{Name: "example-3", ID: "2a7f9e1c44d0b713", Version: "3.6.16", Role: v1.RoleLearner, Healthy: true},
		{Name: "example-4", Healthy: false},
	}
	c.Status.Conditions = []metav1.Condition{
		{Type: v1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Ready", Message: "1/3 members healthy", LastTransitionTime: ago(2 * time.Minute)},
		{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "ScalingUp", Message: "scaling 1 -> 3: adding learner example-3", LastTransitionTime: ago(40 * time.Second)},
		{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "QuorumLost", Message: "2 of 3 voting members lost their data [example-0 example-2]", LastTransitionTime: ago(4 * time.Minute)},
		{Type: v1.ConditionQuorumLost, Status: metav1.ConditionTrue, Reason: "Recovering", Message: "recovering FromSurvivor: example-1 has the most applied log", LastTransitionTime: ago(4 * time.Minute)},
	}
	c.Status.Recovery = &v1.QuorumRecovery{
		Source: "FromSurvivor", Phase: "Restarting", Survivor: "example-1", LostMembers: []string{"example-0", "example-2"},
		Reason: "2 of 3 voting members lost their data [example-0 example-2]", StartedAt: ago(4 * time.Minute),
	}
	c.Status.PendingOperation = &v1.PendingOperation{Type: "AddMember", Member: "example-4"}
	c.Status.TLS.CARotation = &v1.CARotation{Phase: v1.CASignWithNew, Trigger: "2026-11-23T13:40:00Z"}
	c.Status.TLS.Certificates[1].NotAfter = metav1.NewTime(now.Add(-49 * time.Hour))
	return c
}

func TestRenderStatus(t *testing.T) {
	backups := []v1.EtcdBackup{
		backupOf("example-20261122-020000", 36*time.Hour, v1.BackupSucceeded),
		backupOf("example-20261123-020000", 12*time.Hour, v1.BackupSucceeded),
		backupOf("example-20261121-020000", 60*time.Hour, v1.BackupSucceeded),
	}
	var out bytes.Buffer
	if err := renderStatus(&out, healthyCluster(), backups, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status", out.Bytes())
}

func TestRenderStatusRecovering(t *testing.T) {
	failed := backupOf("example-20261123-135500", 5*time.Minute, v1.BackupFailed)
	failed.Status.Conditions = []metav1.Condition{{Type: v1.BackupConditionFailed, Status: metav1.ConditionTrue, Reason: "ClusterUnavailable", Message: "no member of example answers"}}
	c := recoveringCluster()
	c.Spec.Version = "3.6.17"
	c.Status.UpgradeBlocked = &v1.UpgradeBlock{Version: "3.6.17", Target: "3.6.17", Member: "example-2"}
	c.Annotations = map[string]string{
		naming.AnnotationDefragment:        "2026-11-23T13:58:00Z",
		naming.AnnotationRenewCertificates: "2026-11-01T09:00:00Z", // handled: not shown
	}
	c.Status.TLS.RenewCertificatesHandled = "2026-11-01T09:00:00Z"
	var out bytes.Buffer
	if err := renderStatus(&out, c, []v1.EtcdBackup{backupOf("example-20261123-020000", 12*time.Hour, v1.BackupSucceeded), failed}, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-recovering", out.Bytes())
}

func TestRenderStatusNew(t *testing.T) {
	c := &v1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "dev", CreationTimestamp: ago(3 * time.Second)},
		Spec:       v1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", Maintenance: v1.MaintenanceSpec{Paused: true}},
	}
	var out bytes.Buffer
	if err := renderStatus(&out, c, nil, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-new", out.Bytes())
}

func TestRenderMembersAndCerts(t *testing.T) {
	c := recoveringCluster()
	c.Status.Members[0].UnhealthySince = ptrTime(ago(6 * time.Minute))
	c.Status.Members[0].Healthy = false
	var out bytes.Buffer
	if err := renderMembers(&out, c, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "members", out.Bytes())
	out.Reset()
	if err := renderCerts(&out, c, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "certs", out.Bytes())
}

func TestRestoredCluster(t *testing.T) {
	src := healthyCluster()
	src.Spec.Maintenance.Paused = true
	src.Spec.Bootstrap = &v1.BootstrapSpec{Restore: &v1.RestoreSpec{BackupName: "older"}}
	b := backupOf("example-20261123-020000", time.Hour, v1.BackupSucceeded)
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

// The README shows the status golden file: it must be the current output, not a stale copy.
func TestReadmeShowsCurrentStatusOutput(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "status.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, append([]byte("$ kubectl etcd status example -n prod\n"), want...)) {
		t.Error("README.md's kubectl etcd status example differs from testdata/status.golden: copy it over")
	}
}
