package etcdbackup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

func backupJob(t *testing.T, b *etcdv1alpha1.EtcdBackup) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	operatortest.Eventually(t, "backup job", func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b.Name)}, job)
	})
	return job
}

func TestBackupRunsAJobAndRecordsItsReport(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	operatortest.AvailableCluster(t, ns)
	ctx := context.Background()

	// No credentials Secret: refused before any Job.
	nocreds := operatortest.NewBackup(t, ns, "nocreds", operatortest.S3Dest())
	got := operatortest.WaitBackup(t, nocreds, etcdv1alpha1.BackupFailed)
	if f := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupConditionFailed); f == nil || f.Reason != string(reason.CredentialsSecretNotFound) {
		t.Fatalf("failed condition %+v", f)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.BackupJobName("nocreds")}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Job was created without credentials: %v", err)
	}

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: map[string][]byte{
		resources.SecretAccessKeyID: []byte("ak"), resources.SecretSecretAccessKey: []byte("sk")}}
	if err := k8s.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	b := operatortest.NewBackup(t, ns, "nightly", operatortest.S3Dest())
	job := backupJob(t, b)
	operatortest.WaitBackup(t, b, etcdv1alpha1.BackupRunning)
	spec := job.Spec.Template.Spec
	c0 := spec.Containers[0]
	args := strings.Join(c0.Args, " ")
	for _, want := range []string{
		"backup", "--s3-bucket=backups", "--s3-key=prod/" + ns + "/demo/nightly-" + string(b.UID)[:8] + ".db", "--s3-path-style", "--tls-dir=",
		"--endpoints=https://demo-0.demo-peer." + ns + ".svc:2379,https://demo-1.demo-peer." + ns + ".svc:2379,https://demo-2.demo-peer." + ns + ".svc:2379",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("job args %q lack %q", args, want)
		}
	}
	if len(c0.Env) != 2 {
		t.Errorf("env %+v: want the two credentials", c0.Env)
	}
	for _, e := range c0.Env {
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "creds" {
			t.Errorf("credential %s is not a reference to Secret creds: %+v", e.Name, e)
		}
	}
	if c0.Image != operatortest.TestOperatorImage || *spec.AutomountServiceAccountToken || spec.RestartPolicy != corev1.RestartPolicyNever || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("job pod: image %s, token %v, restart %s", c0.Image, *spec.AutomountServiceAccountToken, spec.RestartPolicy)
	}
	if r := job.Spec.PodFailurePolicy.Rules[0]; r.Action != batchv1.PodFailurePolicyActionFailJob || !slices.Contains(r.OnExitCodes.Values, backup.ExitPermanent) {
		t.Errorf("permanent failures are retried: %+v", r)
	}

	res := &backup.Result{Member: "abc", EtcdVersion: "3.6.16", Revision: 42, Size: 1234, SHA256: strings.Repeat("ab", 32), Location: "s3://backups/prod/nightly.db"}
	operatortest.FinishJob(t, job, backup.Report{Result: res}, true)
	got = operatortest.WaitBackup(t, b, etcdv1alpha1.BackupSucceeded)
	st := got.Status
	if st.Revision != 42 || st.Size != 1234 || st.SHA256 != res.SHA256 || st.Location != res.Location || st.EtcdVersion != "3.6.16" || st.StartTime == nil || st.CompletionTime == nil {
		t.Fatalf("status %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.BackupConditionComplete); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("complete condition %+v", c)
	}
	operatortest.Eventually(t, "backup metrics", func() error { // recorded right after the status write
		size, last := testutil.ToFloat64(metrics.BackupLastSize.WithLabelValues(ns, "demo")), testutil.ToFloat64(metrics.BackupLastSuccess.WithLabelValues(ns, "demo"))
		if size != 1234 || last != float64(st.CompletionTime.Unix()) {
			return fmt.Errorf("size %v, last success %v (completion %v)", size, last, st.CompletionTime)
		}
		return nil
	})

	// A failure reported by the Job becomes the Failed condition's reason.
	bad := operatortest.NewBackup(t, ns, "badcreds", operatortest.S3Dest())
	operatortest.FinishJob(t, backupJob(t, bad), backup.Report{Reason: reason.InvalidCredentials, Message: "The Access Key Id you provided does not exist"}, false)
	got = operatortest.WaitBackup(t, bad, etcdv1alpha1.BackupFailed)
	if f := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupConditionFailed); f == nil || f.Reason != string(reason.InvalidCredentials) || !strings.Contains(f.Message, "Access Key") {
		t.Fatalf("failed condition %+v", f)
	}
}

func TestBackupWaitsForItsCluster(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	b := operatortest.NewBackup(t, ns, "early", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "etcd"}})
	got := operatortest.WaitBackup(t, b, etcdv1alpha1.BackupPending)
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupConditionComplete); c == nil || c.Reason != string(reason.ClusterNotFound) {
		t.Fatalf("complete condition %+v", c)
	}
	operatortest.AvailableCluster(t, ns)
	job := backupJob(t, b)
	file := "etcd/" + ns + "/demo/early-" + string(b.UID)[:8] + ".db"
	if a := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(a, "--file=/backup/"+file) || !strings.Contains(a, "--location=pvc://snaps/"+file) {
		t.Fatalf("job args %s", a)
	}
}

// TestBackupRunsWhileAnAlarmMakesTheClusterUnavailable: a cluster that has a leader but is not
// Available (say, its database hit the quota and NOSPACE is raised) is still backed up: that is
// when users need a backup most. The Job picks a member that can serve the snapshot.
func TestBackupRunsWhileAnAlarmMakesTheClusterUnavailable(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	operatortest.QuorateCluster(t, ns, metav1.Condition{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: "NoSpace", Message: "NOSPACE alarm raised"})
	b := operatortest.NewBackup(t, ns, "while-full", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps"}})
	backupJob(t, b)
	operatortest.WaitBackup(t, b, etcdv1alpha1.BackupRunning)
}

func TestRestoreWaitsForTheBackupThenRestoresEveryInitialMember(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "gone", Destination: operatortest.S3Dest()}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "snap"}}
	})
	operatortest.Eventually(t, "restore waits for the backup", func() error {
		cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionRestored)
		if cond == nil || cond.Reason != string(reason.BackupNotReady) {
			return fmt.Errorf("restored condition %+v", cond)
		}
		return nil
	})
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 0 {
		t.Fatalf("%d pods started before the backup exists (%v)", len(pods.Items), err)
	}

	// The backup succeeds (its controller waits for cluster "gone" forever; play it here). Its
	// location has the layout of backups made before keys included namespace and cluster: restores
	// read the recorded location, so those keep working.
	time.Sleep(100 * time.Millisecond)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, Size: 99, SHA256: strings.Repeat("cd", 32), Location: "s3://backups/prod/snap.db"}
	if err := k8s.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "3 restoring pods", func() error {
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	for _, p := range pods.Items {
		if len(p.Spec.InitContainers) != 2 {
			t.Fatalf("pod %s has %d init containers", p.Name, len(p.Spec.InitContainers))
		}
		tools, restore := p.Spec.InitContainers[0], p.Spec.InitContainers[1]
		args := strings.Join(restore.Args, " ")
		if tools.Image != operatortest.TestOperatorImage || restore.Image != p.Spec.Containers[0].Image {
			t.Errorf("%s: tools image %s, restore image %s, etcd image %s", p.Name, tools.Image, restore.Image, p.Spec.Containers[0].Image)
		}
		for _, want := range []string{"--s3-key=prod/snap.db", "--sha256=" + b.Status.SHA256, "--size=99", "--name=" + p.Name, "--data-dir=/var/lib/etcd/data", "--bump-revision=1000000000"} {
			if !strings.Contains(args, want) {
				t.Errorf("%s: restore args %q lack %q", p.Name, args, want)
			}
		}
	}
}
