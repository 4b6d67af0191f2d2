package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
)

// The commands run against a real kube-apiserver with the project's CRDs (envtest); no operator
// runs, so each test checks what the command wrote, and plays the operator where a command waits.
var (
	k8s        client.Client
	kubeconfig string
	namespaces atomic.Int32
)

func TestMain(m *testing.M) {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		panic("start envtest (KUBEBUILDER_ASSETS=bin, `make envtest-assets`): " + err.Error())
	}
	code := func() int {
		defer func() { _ = env.Stop() }()
		scheme := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(scheme)
		_ = etcdv1alpha1.AddToScheme(scheme)
		if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			panic(err)
		}
		// The plugin gets what a user has: a kubeconfig file.
		admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			panic(err)
		}
		kc, err := admin.KubeConfig()
		if err != nil {
			panic(err)
		}
		dir, err := os.MkdirTemp("", "kubectl-etcd-test")
		if err != nil {
			panic(err)
		}
		defer func() { _ = os.RemoveAll(dir) }()
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
			panic(err)
		}
		return m.Run()
	}()
	os.Exit(code)
}

// newNamespace creates a namespace of its own for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("plugin-%d", namespaces.Add(1))
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// kubectlEtcd runs the plugin with args in namespace ns, as a user would, and returns its output.
func kubectlEtcd(t *testing.T, ns string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(Options{
		Streams:      genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		Now:          func() time.Time { return now },
		PollInterval: 50 * time.Millisecond,
	})
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig, "-n", ns))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// createCluster stores c (spec, then status, as the operator would) in ns.
func createCluster(t *testing.T, ns string, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx := context.Background()
	c = c.DeepCopy()
	c.Namespace, c.ResourceVersion, c.CreationTimestamp = ns, "", metav1.Time{}
	status := c.Status
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create EtcdCluster %s: %v", c.Name, err)
	}
	c.Status = status
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatalf("write the status of EtcdCluster %s: %v", c.Name, err)
	}
}

func createBackup(t *testing.T, ns string, b etcdv1alpha1.EtcdBackup) {
	t.Helper()
	ctx := context.Background()
	b.Namespace, b.CreationTimestamp = ns, metav1.Time{}
	if b.Spec.Destination.S3 == nil && b.Spec.Destination.PVC == nil {
		b.Spec.Destination = etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups"}}
	}
	status := b.Status
	if err := k8s.Create(ctx, &b); err != nil {
		t.Fatalf("create EtcdBackup %s: %v", b.Name, err)
	}
	b.Status = status
	if err := k8s.Status().Update(ctx, &b); err != nil {
		t.Fatalf("write the status of EtcdBackup %s: %v", b.Name, err)
	}
}

func getCluster(t *testing.T, ns, name string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestStatusCommand(t *testing.T) {
	ns := newNamespace(t)
	c := healthyCluster()
	c.Namespace = ns
	createCluster(t, ns, c)
	// Ages of backups come from their completion time, which the test sets; creation times are the server's.
	createBackup(t, ns, backupOf("example-20261122-020000", 36*time.Hour, etcdv1alpha1.BackupSucceeded))
	createBackup(t, ns, backupOf("example-20261123-020000", 12*time.Hour, etcdv1alpha1.BackupSucceeded))
	other := backupOf("other-20261123-030000", 11*time.Hour, etcdv1alpha1.BackupSucceeded)
	other.Spec.ClusterName = "other"
	createBackup(t, ns, other)
	// The window of the cluster's schedule with an archive is shown; another cluster's is not.
	for _, sc := range []struct{ name, cluster string }{{"example-nightly", "example"}, {"example-weekly", "example"}, {"other-nightly", "other"}} {
		s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: sc.name, Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
			Schedule: "@daily", Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: sc.cluster, Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps"}}},
		}}
		if err := k8s.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if sc.name == "example-weekly" {
			continue
		}
		s.Status.RecoverableWindow = &etcdv1alpha1.RecoverableWindow{EarliestRevision: 1200, EarliestTime: ago(60 * time.Hour), LatestRevision: 98765, LatestTime: ago(3 * time.Minute)}
		if err := k8s.Status().Update(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}

	out, err := kubectlEtcd(t, ns, "status", "example")
	if err != nil {
		t.Fatal(err)
	}
	// The namespace is the test's own; the rest is the status golden file, read through the API.
	want, err := os.ReadFile(filepath.Join("testdata", "status.golden"))
	if err != nil {
		t.Fatal(err)
	}
	want = bytes.Replace(want, []byte("Namespace:    prod"), []byte("Namespace:    "+ns), 1)
	want = bytes.Replace(want, []byte("(newest of 3)"), []byte("(newest of 2)"), 1)
	if out != string(want) {
		t.Errorf("kubectl etcd status printed:\n%s\nwant (testdata/status.golden):\n%s", out, want)
	}

	if _, err := kubectlEtcd(t, ns, "status", "missing"); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), ns+"/missing") {
		t.Errorf("status of a missing cluster: %v, want a not-found error naming %s/missing", err, ns)
	}
}

func TestMembersAndCertsCommands(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, regrowingCluster())
	out, err := kubectlEtcd(t, ns, "members", "example")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "example-3  Learner  learner") || !strings.Contains(out, "example-1  Leader   voter") {
		t.Errorf("members:\n%s", out)
	}
	rot := rotatingCluster()
	rot.Name = "rot"
	createCluster(t, ns, rot)
	out, err = kubectlEtcd(t, ns, "certs", "rot")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "certs", []byte(out))
}

func TestPauseAndResume(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, healthyCluster())
	out, err := kubectlEtcd(t, ns, "pause", "example")
	if err != nil || out != "etcdcluster/example paused\n" {
		t.Fatalf("pause: %q, %v", out, err)
	}
	c := getCluster(t, ns, "example")
	if !c.Spec.Maintenance.Paused || c.Spec.Version != "3.6.16" || c.Spec.Replicas != 3 {
		t.Errorf("after pause the spec is %+v: want paused and nothing else changed", c.Spec)
	}
	if out, _ := kubectlEtcd(t, ns, "pause", "example"); out != "etcdcluster/example already paused\n" {
		t.Errorf("pausing twice: %q", out)
	}
	if out, err := kubectlEtcd(t, ns, "resume", "example"); err != nil || out != "etcdcluster/example resumed\n" {
		t.Fatalf("resume: %q, %v", out, err)
	}
	if getCluster(t, ns, "example").Spec.Maintenance.Paused {
		t.Error("still paused after resume")
	}
}

func TestRecoverSetsTheOperatorsAnnotation(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, healthyCluster())
	if _, err := kubectlEtcd(t, ns, "recover", "example", "--from", "Survivor"); err != nil {
		t.Fatal(err)
	}
	if got := getCluster(t, ns, "example").Annotations[planner.RecoverAnnotation]; got != planner.FromSurvivor {
		t.Errorf("%s = %q, want %s", planner.RecoverAnnotation, got, planner.FromSurvivor)
	}
	if _, err := kubectlEtcd(t, ns, "recover", "example", "--from", "backup"); err != nil {
		t.Fatal(err)
	}
	if got := getCluster(t, ns, "example").Annotations[planner.RecoverAnnotation]; got != planner.FromBackup {
		t.Errorf("%s = %q, want %s", planner.RecoverAnnotation, got, planner.FromBackup)
	}
	if _, err := kubectlEtcd(t, ns, "recover", "example", "--from", "nowhere"); err == nil {
		t.Error("--from nowhere was accepted")
	}
	if _, err := kubectlEtcd(t, ns, "recover", "example"); err == nil {
		t.Error("recover without --from was accepted")
	}

	rec := regrowingCluster()
	rec.Name = "busy"
	rec.Status.Recovery.Phase, rec.Status.Recovery.CompletedAt = etcdv1alpha1.RecoveryRestarting, nil
	createCluster(t, ns, rec)
	if _, err := kubectlEtcd(t, ns, "recover", "busy", "--from", "Backup"); err == nil || !strings.Contains(err.Error(), "already recovering") {
		t.Errorf("recover during a recovery: %v, want a refusal", err)
	}
	if _, ok := getCluster(t, ns, "busy").Annotations[planner.RecoverAnnotation]; ok {
		t.Error("a cluster already recovering was annotated")
	}
}

func TestCertificateRequests(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, healthyCluster())
	want := now.UTC().Format(time.RFC3339)
	if _, err := kubectlEtcd(t, ns, "renew-certs", "example"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectlEtcd(t, ns, "rotate-ca", "example"); err != nil {
		t.Fatal(err)
	}
	a := getCluster(t, ns, "example").Annotations
	if a[naming.AnnotationRenewCertificates] != want || a[naming.AnnotationRotateCA] != want {
		t.Errorf("annotations %v: want %s and %s set to %s", a, naming.AnnotationRenewCertificates, naming.AnnotationRotateCA, want)
	}

	rotating := rotatingCluster()
	rotating.Name = "rotating"
	createCluster(t, ns, rotating)
	if _, err := kubectlEtcd(t, ns, "rotate-ca", "rotating"); err == nil || !strings.Contains(err.Error(), "already rotating") {
		t.Errorf("rotate-ca during a rotation: %v, want a refusal", err)
	}
	if _, ok := getCluster(t, ns, "rotating").Annotations[naming.AnnotationRotateCA]; ok {
		t.Error("a second rotation was requested during the first")
	}
}

func TestDefragAndMoveLeaderRequests(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, regrowingCluster()) // example-1 leads, example-3 is a learner
	if _, err := kubectlEtcd(t, ns, "defrag", "example"); err != nil {
		t.Fatal(err)
	}
	if got := getCluster(t, ns, "example").Annotations[naming.AnnotationDefragment]; got != now.UTC().Format(time.RFC3339) {
		t.Errorf("%s = %q", naming.AnnotationDefragment, got)
	}
	for member, refusal := range map[string]string{"example-1": "already leads", "example-3": "learner", "example-9": "no member example-9"} {
		if _, err := kubectlEtcd(t, ns, "move-leader", "example", "--to", member); err == nil || !strings.Contains(err.Error(), refusal) {
			t.Errorf("move-leader --to %s: %v, want %q", member, err, refusal)
		}
	}
	if _, ok := getCluster(t, ns, "example").Annotations[naming.AnnotationMoveLeader]; ok {
		t.Fatal("a refused move-leader was written")
	}
	createCluster(t, ns, func() *etcdv1alpha1.EtcdCluster { c := healthyCluster(); c.Name = "steady"; return c }())
	if _, err := kubectlEtcd(t, ns, "move-leader", "steady", "--to", "example-2"); err != nil {
		t.Fatal(err)
	}
	if got := getCluster(t, ns, "steady").Annotations[naming.AnnotationMoveLeader]; got != "example-2" {
		t.Errorf("%s = %q, want example-2", naming.AnnotationMoveLeader, got)
	}
}

func TestBackupTakesTheSchedulesDestinationAndWaits(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	createCluster(t, ns, healthyCluster())
	if _, err := kubectlEtcd(t, ns, "backup", "example"); err == nil || !strings.Contains(err.Error(), "--pvc or --s3-bucket") {
		t.Errorf("a backup without any destination: %v, want a request for one", err)
	}
	dest := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "etcd-backups", Prefix: "prod", Region: "us-east-1", CredentialsSecret: "s3-creds"}}
	schedule := &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec:       etcdv1alpha1.EtcdBackupScheduleSpec{Schedule: "0 2 * * *", Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "example", Destination: dest}},
	}
	if err := k8s.Create(ctx, schedule); err != nil {
		t.Fatal(err)
	}

	// The operator's part: the Job finishes and the backup is recorded Succeeded.
	name := "example-20261123-140000"
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b etcdv1alpha1.EtcdBackup
		for k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b) != nil {
			time.Sleep(50 * time.Millisecond)
		}
		b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupRunning}
		_ = k8s.Status().Update(ctx, &b)
		time.Sleep(200 * time.Millisecond)
		b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, Revision: 7, Size: 20480, SHA256: strings.Repeat("ab", 32), Location: "s3://etcd-backups/prod/x.db"}
		_ = k8s.Status().Update(ctx, &b)
	}()
	out, err := kubectlEtcd(t, ns, "backup", "example", "--wait")
	<-done
	if err != nil {
		t.Fatalf("backup --wait: %v\n%s", err, out)
	}
	for _, want := range []string{"etcdbackup/" + name + " created (destination of schedule nightly)", "Succeeded", "revision 7, 20.0 KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("backup --wait printed:\n%s\nwant %q in it", out, want)
		}
	}
	var b etcdv1alpha1.EtcdBackup
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.ClusterName != "example" || b.Spec.Destination.S3 == nil || *b.Spec.Destination.S3 != *dest.S3 {
		t.Errorf("EtcdBackup spec %+v: want cluster example to the schedule's destination", b.Spec)
	}
}

func TestBackupWaitReportsFailure(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	createCluster(t, ns, healthyCluster())
	name := "example-20261123-140000"
	go func() {
		var b etcdv1alpha1.EtcdBackup
		for k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b) != nil {
			time.Sleep(50 * time.Millisecond)
		}
		b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupFailed, Conditions: []metav1.Condition{{
			Type: etcdv1alpha1.BackupConditionFailed, Status: metav1.ConditionTrue, Reason: "BucketNotFound", Message: "bucket nope does not exist", LastTransitionTime: metav1.Now(),
		}}}
		_ = k8s.Status().Update(ctx, &b)
	}()
	_, err := kubectlEtcd(t, ns, "backup", "example", "--pvc", "backups", "--path", "etcd", "--wait")
	if err == nil || !strings.Contains(err.Error(), "BucketNotFound: bucket nope does not exist") {
		t.Errorf("backup --wait of a failing backup: %v, want the failure's reason", err)
	}
	var b etcdv1alpha1.EtcdBackup
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
		t.Fatal(err)
	}
	if p := b.Spec.Destination.PVC; p == nil || p.ClaimName != "backups" || p.Path != "etcd" {
		t.Errorf("destination %+v, want pvc backups path etcd", b.Spec.Destination)
	}
}

func TestRestoreCreatesANewClusterAndLeavesTheOldOne(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, healthyCluster())
	createBackup(t, ns, backupOf("example-20261123-020000", 12*time.Hour, etcdv1alpha1.BackupSucceeded))
	createBackup(t, ns, backupOf("example-20261123-130000", time.Hour, etcdv1alpha1.BackupRunning))

	if _, err := kubectlEtcd(t, ns, "restore", "example", "--from-backup", "example-20261123-020000"); err == nil || !strings.Contains(err.Error(), "--new-name") {
		t.Errorf("restore over the existing cluster: %v, want a refusal asking for --new-name", err)
	}
	if _, err := kubectlEtcd(t, ns, "restore", "example", "--from-backup", "example-20261123-130000", "--new-name", "x"); err == nil || !strings.Contains(err.Error(), "Running") {
		t.Errorf("restore of an unfinished backup: %v, want a refusal", err)
	}
	out, err := kubectlEtcd(t, ns, "restore", "example", "--from-backup", "example-20261123-020000", "--new-name", "example-restored", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "backupName: example-20261123-020000") || !strings.Contains(out, "name: example-restored") {
		t.Errorf("restore --dry-run printed:\n%s", out)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "example-restored"}, &etcdv1alpha1.EtcdCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("--dry-run created the cluster (get: %v)", err)
	}

	if _, err := kubectlEtcd(t, ns, "restore", "example", "--from-backup", "example-20261123-020000", "--new-name", "example-restored"); err != nil {
		t.Fatal(err)
	}
	got := getCluster(t, ns, "example-restored")
	if r := got.Spec.Bootstrap; r == nil || r.Restore == nil || r.Restore.BackupName != "example-20261123-020000" {
		t.Errorf("restored cluster's bootstrap %+v", got.Spec.Bootstrap)
	}
	if got.Spec.Replicas != 3 || !got.Spec.Storage.Size.Equal(resource.MustParse("8Gi")) {
		t.Errorf("restored cluster's spec %+v: want the source's", got.Spec)
	}
	if old := getCluster(t, ns, "example"); old.Spec.Bootstrap != nil {
		t.Errorf("the existing cluster's bootstrap changed: %+v", old.Spec.Bootstrap)
	}
}

func TestRestoreToAPointInTimePicksTheNewestBackupBeforeIt(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, healthyCluster())
	old := backupOf("example-old", 12*time.Hour, etcdv1alpha1.BackupSucceeded)
	old.Status.ClusterID, old.Status.Revision = "c0ffee", 1000
	recent := backupOf("example-recent", time.Hour, etcdv1alpha1.BackupSucceeded)
	recent.Status.ClusterID, recent.Status.Revision = "c0ffee", 5000
	legacy := backupOf("example-legacy", 30*time.Minute, etcdv1alpha1.BackupSucceeded) // no cluster ID: no archive to find
	for _, b := range []etcdv1alpha1.EtcdBackup{old, recent, legacy} {
		createBackup(t, ns, b)
	}
	for _, tc := range []struct {
		args       []string
		backup     string
		pointInTme string
	}{
		{[]string{"--to-latest"}, "example-recent", "{}"},
		{[]string{"--to-revision", "4999"}, "example-old", "revision: 4999"},
		{[]string{"--to-time", now.Add(-6 * time.Hour).UTC().Format(time.RFC3339)}, "example-old", "time: "},
		{[]string{"--to-time", now.UTC().Format(time.RFC3339), "--from-backup", "example-old"}, "example-old", "time: "},
	} {
		out, err := kubectlEtcd(t, ns, append([]string{"restore", "example", "--new-name", "x", "--dry-run"}, tc.args...)...)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if !strings.Contains(out, "backupName: "+tc.backup) || !strings.Contains(out, "pointInTime: "+tc.pointInTme) && !strings.Contains(out, "pointInTime:\n        "+tc.pointInTme) {
			t.Errorf("%v printed:\n%s", tc.args, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--new-name", "x"}, "--from-backup BACKUP, or a point in time"},
		{[]string{"--new-name", "x", "--to-latest", "--to-revision", "3"}, "exclude each other"},
		{[]string{"--new-name", "x", "--to-time", "yesterday"}, "RFC 3339"},
		{[]string{"--new-name", "x", "--to-revision", "10"}, "no successful backup of etcdcluster/example"},
	} {
		if _, err := kubectlEtcd(t, ns, append([]string{"restore", "example"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, err := kubectlEtcd(t, ns, "restore", "example", "--new-name", "example-pitr", "--to-revision", "5100"); err != nil {
		t.Fatal(err)
	}
	got := getCluster(t, ns, "example-pitr")
	if r := got.Spec.Bootstrap.Restore; r.BackupName != "example-recent" || r.PointInTime == nil || r.PointInTime.Revision != 5100 {
		t.Errorf("restore %+v", r)
	}
}

func TestLogsNeedsAKnownMember(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, healthyCluster())
	if _, err := kubectlEtcd(t, ns, "logs", "example", "--member", "example-9"); err == nil || !strings.Contains(err.Error(), "no member example-9") {
		t.Errorf("logs of an unknown member: %v", err)
	}
	// envtest has no kubelet: asking for a real member's logs reaches the API server, which finds no pod.
	if _, err := kubectlEtcd(t, ns, "logs", "example", "--member", "example-1", "--tail", "10"); err == nil || !strings.Contains(err.Error(), "logs of member example-1") {
		t.Errorf("logs of a member without a pod: %v", err)
	}
}

// Every command explains itself and shows an example: --help is the plugin's manual.
func TestEveryCommandHasHelpAndExamples(t *testing.T) {
	root := NewCommand(Options{Streams: genericiooptions.NewTestIOStreamsDiscard()})
	var check func(*cobra.Command)
	check = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%s: Short, Long and Example must all be written", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			check(sub)
		}
	}
	check(root)
	if len(root.Commands()) < 13 {
		t.Errorf("%d commands, want at least 13", len(root.Commands()))
	}
}
