package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
)

const testOperatorImage = "example.test/etcd-autopilot:test"

// availableCluster is an EtcdCluster whose status says it is available. Its version is one the
// operator does not support, so the cluster controller (running in this envtest) stops before
// observing etcd and leaves this status alone; no kubelet runs here to start real members.
func availableCluster(t *testing.T, ns string) {
	t.Helper()
	quorateCluster(t, ns, metav1.Condition{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "QuorumHealthy"})
}

// quorateCluster is availableCluster with a leader among its members and the given Available condition.
func quorateCluster(t *testing.T, ns string, available metav1.Condition) {
	t.Helper()
	c := newCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.0" })
	eventually(t, "cluster marked unsupported", func() error {
		if cond := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded); cond == nil || cond.Reason != "UnsupportedVersion" {
			return fmt.Errorf("degraded = %v", cond)
		}
		return nil
	})
	cur := get(t, c)
	cur.Status.Bootstrapped = true
	cur.Status.Members = []etcdv1alpha1.MemberStatus{{Name: "demo-0", Role: etcdv1alpha1.RoleLeader}, {Name: "demo-1", Role: etcdv1alpha1.RoleFollower}, {Name: "demo-2", Role: etcdv1alpha1.RoleFollower}}
	meta.SetStatusCondition(&cur.Status.Conditions, available)
	if err := k8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

func newBackup(t *testing.T, ns, name string, dest etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: dest}}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

func s3Dest() etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "backups", Prefix: "prod", Endpoint: "http://minio.storage.svc:9000", Region: "us-east-1", ForcePathStyle: true, CredentialsSecret: "creds"}}
}

func waitBackup(t *testing.T, b *etcdv1alpha1.EtcdBackup, phase etcdv1alpha1.BackupPhase) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	out := &etcdv1alpha1.EtcdBackup{}
	eventually(t, "backup "+b.Name+" "+string(phase), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(b), out); err != nil {
			return err
		}
		if out.Status.Phase != phase {
			return fmt.Errorf("phase %q, conditions %+v", out.Status.Phase, out.Status.Conditions)
		}
		return nil
	})
	return out
}

func backupJob(t *testing.T, b *etcdv1alpha1.EtcdBackup) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	eventually(t, "backup job", func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b.Name)}, job)
	})
	return job
}

// finishJob plays the Job controller and kubelet, which envtest lacks: one pod of the Job ends

// createJobPod creates the pod the Job controller would: the template's labels (the operator's: its
// cache sees no other pod) plus the job-name label, with the Job as its controller.
func createJobPod(t *testing.T, job *batchv1.Job) *corev1.Pod {
	t.Helper()
	labels := maps.Clone(job.Spec.Template.Labels)
	labels[batchv1.JobNameLabel] = job.Name
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: job.Namespace, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// with rep as its termination message, and the Job is marked complete or failed.
func finishJob(t *testing.T, job *batchv1.Job, rep backup.Report, succeeded bool) {
	t.Helper()
	ctx := context.Background()
	pod := createJobPod(t, job)
	msg, _ := json.Marshal(rep)
	phase, code := corev1.PodSucceeded, int32(0)
	if !succeeded {
		phase, code = corev1.PodFailed, backup.ExitPermanent
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.BackupContainer, Image: testOperatorImage, ImageID: "x",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: string(msg)}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status.StartTime = &now
	if succeeded {
		job.Status.Succeeded, job.Status.CompletionTime = 1, &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	}
	if err := k8s.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}

func TestBackupRunsAJobAndRecordsItsReport(t *testing.T) {
	ns := newNamespace(t)
	availableCluster(t, ns)
	ctx := context.Background()

	// No credentials Secret: refused before any Job.
	nocreds := newBackup(t, ns, "nocreds", s3Dest())
	got := waitBackup(t, nocreds, etcdv1alpha1.BackupFailed)
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
	b := newBackup(t, ns, "nightly", s3Dest())
	job := backupJob(t, b)
	waitBackup(t, b, etcdv1alpha1.BackupRunning)
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
	if c0.Image != testOperatorImage || *spec.AutomountServiceAccountToken || spec.RestartPolicy != corev1.RestartPolicyNever || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("job pod: image %s, token %v, restart %s", c0.Image, *spec.AutomountServiceAccountToken, spec.RestartPolicy)
	}
	if r := job.Spec.PodFailurePolicy.Rules[0]; r.Action != batchv1.PodFailurePolicyActionFailJob || !slices.Contains(r.OnExitCodes.Values, backup.ExitPermanent) {
		t.Errorf("permanent failures are retried: %+v", r)
	}

	res := &backup.Result{Member: "abc", EtcdVersion: "3.6.16", Revision: 42, Size: 1234, SHA256: strings.Repeat("ab", 32), Location: "s3://backups/prod/nightly.db"}
	finishJob(t, job, backup.Report{Result: res}, true)
	got = waitBackup(t, b, etcdv1alpha1.BackupSucceeded)
	st := got.Status
	if st.Revision != 42 || st.Size != 1234 || st.SHA256 != res.SHA256 || st.Location != res.Location || st.EtcdVersion != "3.6.16" || st.StartTime == nil || st.CompletionTime == nil {
		t.Fatalf("status %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.BackupConditionComplete); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("complete condition %+v", c)
	}
	eventually(t, "backup metrics", func() error { // recorded right after the status write
		size, last := testutil.ToFloat64(metrics.BackupLastSize.WithLabelValues(ns, "demo")), testutil.ToFloat64(metrics.BackupLastSuccess.WithLabelValues(ns, "demo"))
		if size != 1234 || last != float64(st.CompletionTime.Unix()) {
			return fmt.Errorf("size %v, last success %v (completion %v)", size, last, st.CompletionTime)
		}
		return nil
	})

	// A failure reported by the Job becomes the Failed condition's reason.
	bad := newBackup(t, ns, "badcreds", s3Dest())
	finishJob(t, backupJob(t, bad), backup.Report{Reason: reason.InvalidCredentials, Message: "The Access Key Id you provided does not exist"}, false)
	got = waitBackup(t, bad, etcdv1alpha1.BackupFailed)
	if f := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupConditionFailed); f == nil || f.Reason != string(reason.InvalidCredentials) || !strings.Contains(f.Message, "Access Key") {
		t.Fatalf("failed condition %+v", f)
	}
}

func TestBackupWaitsForItsCluster(t *testing.T) {
	ns := newNamespace(t)
	b := newBackup(t, ns, "early", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "etcd"}})
	got := waitBackup(t, b, etcdv1alpha1.BackupPending)
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupConditionComplete); c == nil || c.Reason != string(reason.ClusterNotFound) {
		t.Fatalf("complete condition %+v", c)
	}
	availableCluster(t, ns)
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
	ns := newNamespace(t)
	quorateCluster(t, ns, metav1.Condition{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: "NoSpace", Message: "NOSPACE alarm raised"})
	b := newBackup(t, ns, "while-full", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps"}})
	backupJob(t, b)
	waitBackup(t, b, etcdv1alpha1.BackupRunning)
}

func TestRestoreWaitsForTheBackupThenRestoresEveryInitialMember(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "gone", Destination: s3Dest()}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "snap"}}
	})
	eventually(t, "restore waits for the backup", func() error {
		cond := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionRestored)
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
	eventually(t, "3 restoring pods", func() error {
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
		if tools.Image != testOperatorImage || restore.Image != p.Spec.Containers[0].Image {
			t.Errorf("%s: tools image %s, restore image %s, etcd image %s", p.Name, tools.Image, restore.Image, p.Spec.Containers[0].Image)
		}
		for _, want := range []string{"--s3-key=prod/snap.db", "--sha256=" + b.Status.SHA256, "--size=99", "--name=" + p.Name, "--data-dir=/var/lib/etcd/data", "--bump-revision=1000000000"} {
			if !strings.Contains(args, want) {
				t.Errorf("%s: restore args %q lack %q", p.Name, args, want)
			}
		}
	}
}
