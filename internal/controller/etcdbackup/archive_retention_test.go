package etcdbackup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// archivedBackup creates a succeeded backup of etcd cluster clusterID at revision rev, made by
// schedule s at `at` (s nil: by hand), with its snapshot stored.
func archivedBackup(t *testing.T, ns, name string, s *etcdv1alpha1.EtcdBackupSchedule, at time.Time, clusterID string, rev int64) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()}}
	if s != nil {
		b.Labels = map[string]string{naming.LabelSchedule: s.Name}
		b.Annotations = map[string]string{naming.AnnotationScheduledAt: at.UTC().Format(time.RFC3339)}
		b.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(s, etcdv1alpha1.GroupVersion.WithKind("EtcdBackupSchedule"))}
		b.Finalizers = []string{naming.SnapshotFinalizer}
	}
	done := metav1.NewTime(at)
	return operatortest.CreateFinished(t, b, etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &done, CompletionTime: &done,
		Location: "s3://backups/prod/" + ns + "/demo/" + name + ".db", Revision: rev, ClusterID: clusterID})
}

// deleteJobOf waits for the snapshot deletion Job of b.
func deleteJobOf(t *testing.T, b *etcdv1alpha1.EtcdBackup) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	operatortest.Eventually(t, "snapshot delete job of "+b.Name, func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupDeleteJobName(b.Name)}, job)
	})
	return job
}

// finishDeleteJob plays the Job controller and kubelet for a deletion Job whose prune reported rep
// (in its init container's termination message) and whose snapshot deletion succeeded.
func finishDeleteJob(t *testing.T, job *batchv1.Job, rep archive.PruneReport) {
	t.Helper()
	ctx := context.Background()
	pod := operatortest.CreateJobPod(t, job)
	msg, _ := json.Marshal(rep)
	done := func(name, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: operatortest.TestOperatorImage, ImageID: "x",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}
	}
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{done(resources.ArchivePruneContainer, string(msg))}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{done(resources.BackupContainer, "deleted")}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status.StartTime, job.Status.Succeeded, job.Status.CompletionTime = &now, 1, &now
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	if err := k8s.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}

// waitScheduleEvent waits for an event of type typ and reason why on s whose message holds every one of want.
func waitScheduleEvent(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, typ string, why reason.Reason, want ...string) {
	t.Helper()
	operatortest.Eventually(t, "event "+string(why), func() error {
		evs := &corev1.EventList{}
		if err := k8s.List(context.Background(), evs, client.InNamespace(s.Namespace)); err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason != string(why) || e.Type != typ || e.InvolvedObject.Name != s.Name {
				continue
			}
			seen = append(seen, e.Message)
			if ok := func() bool {
				for _, w := range want {
					if !strings.Contains(e.Message, w) {
						return false
					}
				}
				return true
			}(); ok {
				return nil
			}
		}
		return fmt.Errorf("%s events: %q", why, seen)
	})
}

// TestRetentionPrunesTheArchiveWithTheBackups: when retention deletes backups of a schedule that
// archives, each one's deletion Job prunes the archive first: the chain of the cluster's current
// etcd cluster loses the segments before the oldest remaining backup of it (a hand-made one
// counts), the chain of an old etcd cluster whose last backup goes is deleted whole, and the
// outcome is an event on the schedule. A schedule that does not archive prunes nothing.
func TestRetentionPrunesTheArchiveWithTheBackups(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	c.Spec.Replicas, c.Spec.Storage.Size, c.Spec.Maintenance.Paused = 1, resource.MustParse("1Gi"), true
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	operatortest.SetClusterID(t, c, "bbbb")
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "pitr", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 10, Archive: &etcdv1alpha1.ArchiveSpec{},
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	now := operatortest.ScheduleClock.Now()
	old := archivedBackup(t, ns, "pitr-old", s, now.Add(-5*time.Hour), "aaaa", 900) // before a restore made etcd cluster bbbb
	first := archivedBackup(t, ns, "pitr-1", s, now.Add(-4*time.Hour), "bbbb", 50)
	archivedBackup(t, ns, "pitr-2", s, now.Add(-3*time.Hour), "bbbb", 120)
	archivedBackup(t, ns, "pitr-3", s, now.Add(-2*time.Hour), "bbbb", 200)
	archivedBackup(t, ns, "by-hand", nil, now.Add(-time.Hour), "bbbb", 80)

	operatortest.Eventually(t, "keepLast 2", func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		cur.Spec.KeepLast = 2
		return k8s.Update(ctx, cur)
	})
	chain := "--s3-prefix=prod/" + ns + "/demo/archive/"
	for b, want := range map[*etcdv1alpha1.EtcdBackup][]string{
		old:   {chain + "aaaa", "--drop"},
		first: {chain + "bbbb", "--before=80"},
	} {
		job := deleteJobOf(t, b)
		pod := job.Spec.Template.Spec
		if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != resources.ArchivePruneContainer {
			t.Fatalf("deletion Job of %s: init containers %+v; want the archive's prune", b.Name, pod.InitContainers)
		}
		args := strings.Join(pod.InitContainers[0].Args, " ")
		for _, w := range append(want, "archive prune", "--s3-bucket=backups") {
			if !strings.Contains(args, w) {
				t.Errorf("prune of %s: args %q lack %q", b.Name, args, w)
			}
		}
		if a := strings.Join(pod.Containers[0].Args, " "); !strings.HasPrefix(a, "delete ") || !strings.Contains(a, "--s3-key=prod/"+ns+"/demo/"+b.Name+".db") {
			t.Errorf("snapshot deletion of %s: args %q", b.Name, a)
		}
	}

	loc := "s3://backups/prod/" + ns + "/demo/archive/"
	finishDeleteJob(t, deleteJobOf(t, first), archive.PruneReport{Chain: loc + "bbbb", Before: 80, Deleted: 7, First: 75, Last: 230})
	waitScheduleEvent(t, s, corev1.EventTypeNormal, reason.ArchivePruned, "deleted 7 segments", loc+"bbbb", "now starts at revision 75")
	operatortest.WaitGone(t, first)
	finishDeleteJob(t, deleteJobOf(t, old), archive.PruneReport{Chain: loc + "aaaa", Dropped: true, Deleted: 2, Reason: string(reason.AccessDenied), Message: "delete denied"})
	waitScheduleEvent(t, s, corev1.EventTypeWarning, reason.ArchivePruneFailed, loc+"aaaa", "AccessDenied delete denied", "deleted by hand")
	operatortest.WaitGone(t, old) // the snapshot went: a failed prune does not hold the backup

	plain := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 10, Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()},
	}}
	if err := k8s.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	b := archivedBackup(t, ns, "plain-1", plain, now, "bbbb", 300)
	if err := k8s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if job := deleteJobOf(t, b); len(job.Spec.Template.Spec.InitContainers) != 0 {
		t.Errorf("a schedule without an archive prunes one: %+v", job.Spec.Template.Spec.InitContainers)
	}
}
