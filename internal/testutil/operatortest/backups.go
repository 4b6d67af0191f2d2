package operatortest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

const TestOperatorImage = "example.test/etcd-autopilot:test"

// AvailableCluster is an EtcdCluster whose status says it is available. Its version is one the
// operator does not support, so the cluster controller (running in this envtest) stops before
// observing etcd and leaves this status alone; no kubelet runs here to start real members.
func AvailableCluster(t *testing.T, ns string) {
	t.Helper()
	QuorateCluster(t, ns, metav1.Condition{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "QuorumHealthy"})
}

// QuorateCluster is AvailableCluster with a leader among its members and the given Available condition.
func QuorateCluster(t *testing.T, ns string, available metav1.Condition) {
	t.Helper()
	c := NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.0" })
	Eventually(t, "cluster marked unsupported", func() error {
		if cond := meta.FindStatusCondition(Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded); cond == nil || cond.Reason != "UnsupportedVersion" {
			return fmt.Errorf("degraded = %v", cond)
		}
		return nil
	})
	cur := Get(t, c)
	cur.Status.Bootstrapped = true
	cur.Status.Members = []etcdv1alpha1.MemberStatus{{Name: "demo-0", Role: etcdv1alpha1.RoleLeader}, {Name: "demo-1", Role: etcdv1alpha1.RoleFollower}, {Name: "demo-2", Role: etcdv1alpha1.RoleFollower}}
	meta.SetStatusCondition(&cur.Status.Conditions, available)
	if err := k8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

// NewBackup creates an EtcdBackup of cluster "demo" to dest.
func NewBackup(t *testing.T, ns, name string, dest etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: dest}}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// S3Dest is an S3 destination; no S3 answers there in envtest.
func S3Dest() etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "backups", Prefix: "prod", Endpoint: "http://minio.storage.svc:9000", Region: "us-east-1", ForcePathStyle: true, CredentialsSecret: "creds"}}
}

// WaitBackup waits until b is in phase, and returns it as it is then.
func WaitBackup(t *testing.T, b *etcdv1alpha1.EtcdBackup, phase etcdv1alpha1.BackupPhase) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	out := &etcdv1alpha1.EtcdBackup{}
	Eventually(t, "backup "+b.Name+" "+string(phase), func() error {
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

// CreateJobPod creates the pod the Job controller would: the template's labels (the operator's: its
// cache sees no other pod) plus the job-name label, with the Job as its controller.
func CreateJobPod(t *testing.T, job *batchv1.Job) *corev1.Pod {
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

// FinishJob plays the Job controller and kubelet, which envtest lacks: one pod of the Job ends
// with rep as its termination message, and the Job is marked complete or failed.
func FinishJob(t *testing.T, job *batchv1.Job, rep backup.Report, succeeded bool) {
	t.Helper()
	ctx := context.Background()
	pod := CreateJobPod(t, job)
	msg, _ := json.Marshal(rep)
	phase, code := corev1.PodSucceeded, int32(0)
	if !succeeded {
		phase, code = corev1.PodFailed, backup.ExitPermanent
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.BackupContainer, Image: TestOperatorImage, ImageID: "x",
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
