package etcdbackupschedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

func archiving(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, status metav1.ConditionStatus, why reason.Reason) {
	t.Helper()
	operatortest.Eventually(t, fmt.Sprintf("Archiving=%s %s", status, why), func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, ConditionArchiving)
		if c == nil || c.Status != status || c.Reason != string(why) {
			return fmt.Errorf("Archiving = %+v", c)
		}
		return nil
	})
}

// archivePod waits for the schedule's worker pod whose arguments hold every one of want.
func archivePod(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, want ...string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	operatortest.Eventually(t, "archive pod with "+strings.Join(want, " "), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: s.Namespace, Name: resources.ArchivePodName(s.Name)}, pod); err != nil {
			return err
		}
		args := strings.Join(pod.Spec.Containers[0].Args, " ")
		for _, w := range want {
			if !strings.Contains(args, w) {
				return fmt.Errorf("args %q lack %q", args, w)
			}
		}
		return nil
	})
	return pod
}

// playWorker writes the kubelet's report of the worker container into the pod's status.
func playWorker(t *testing.T, pod *corev1.Pod, st corev1.ContainerStatus) {
	t.Helper()
	operatortest.Eventually(t, "worker status", func() error {
		cur := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		st.Name, st.Image = resources.ArchiveContainer, cur.Spec.Containers[0].Image
		cur.Status.Phase, cur.Status.ContainerStatuses = corev1.PodRunning, []corev1.ContainerStatus{st}
		return k8s.Status().Update(context.Background(), cur)
	})
}

// The schedule's archive worker follows spec.archive and the cluster: none before the cluster has
// an etcd cluster ID; one, writing beside the snapshots under that ID, once it has; the state of
// the worker in the Archiving condition; after a compaction outran it, a backup out of schedule and
// a worker that restarts the chain just after it; a new chain for a new etcd cluster (a recovery
// from a snapshot); no worker once spec.archive is removed.
func TestArchiveWorkerFollowsTheScheduleAndTheCluster(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "pitr", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "@daily", KeepLast: 3, Archive: &etcdv1alpha1.ArchiveSpec{},
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "etcd"}}},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	archiving(t, s, metav1.ConditionFalse, reason.ArchiveWaitingForCluster)

	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	c.Spec.Replicas, c.Spec.Storage.Size, c.Spec.Maintenance.Paused = 1, resource.MustParse("1Gi"), true
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	operatortest.Poke(t, s)
	archiving(t, s, metav1.ConditionFalse, reason.ArchiveWaitingForCluster) // no etcd cluster ID yet
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.ArchivePodName(s.Name)}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a worker before the cluster formed: %v", err)
	}

	operatortest.SetClusterID(t, c, "c0ffee")
	operatortest.Poke(t, s)
	chain := "--dir=/backup/etcd/" + ns + "/demo/archive/c0ffee"
	pod := archivePod(t, s, "archive run", chain, "--flush-interval=1s")
	archiving(t, s, metav1.ConditionFalse, reason.ArchiveStarting)
	cur := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil || cur.Status.ArchiveLocation != "pvc://snaps/etcd/"+ns+"/demo/archive/c0ffee" {
		t.Errorf("archive location %q (%v)", cur.Status.ArchiveLocation, err)
	}

	playWorker(t, pod, corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}})
	archiving(t, s, metav1.ConditionTrue, reason.Archiving)

	// A compaction outran the worker: one backup is taken at once, and the chain restarts after it.
	stopped := metav1.Now()
	playWorker(t, pod, corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: archive.ExitCompacted, FinishedAt: stopped, Message: "the source compacted up to revision 900 before revision 700 was archived"}},
		RestartCount:         1,
	})
	archiving(t, s, metav1.ConditionFalse, reason.ArchiveCompacted)
	var b etcdv1alpha1.EtcdBackup
	operatortest.Eventually(t, "a backup out of schedule", func() error {
		bs := scheduleBackups(t, s)
		if len(bs) != 1 {
			return fmt.Errorf("%d backups", len(bs))
		}
		b = bs[0]
		return nil
	})
	operatortest.Poke(t, s)
	time.Sleep(time.Second)
	if bs := scheduleBackups(t, s); len(bs) != 1 {
		t.Fatalf("%d backups for one compaction", len(bs))
	}
	operatortest.Eventually(t, "backup succeeded at revision 1000", func() error {
		cur := &etcdv1alpha1.EtcdBackup{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(&b), cur); err != nil {
			return err
		}
		done := metav1.NewTime(time.Now().Add(time.Second))
		cur.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &stopped, CompletionTime: &done, Revision: 1000, ClusterID: "c0ffee"}
		return k8s.Status().Update(ctx, cur)
	})
	restarted := archivePod(t, s, chain, "--start-revision=1001")
	if restarted.UID == pod.UID {
		t.Fatal("the stopped worker was not replaced")
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil || cur.Status.ArchiveRestartRevision != 1001 {
		t.Errorf("restart revision in status: %d (%v)", cur.Status.ArchiveRestartRevision, err)
	}
	// Its replacement (any later one of the same etcd cluster) keeps the restart revision.
	if err := k8s.Delete(ctx, restarted); err != nil {
		t.Fatal(err)
	}
	operatortest.Poke(t, s)
	operatortest.Eventually(t, "a worker again", func() error {
		p := archivePod(t, s, chain, "--start-revision=1001")
		if p.UID == restarted.UID {
			return fmt.Errorf("still the deleted pod")
		}
		return nil
	})

	// A recovery from a snapshot makes a new etcd cluster: a new chain, from its beginning.
	operatortest.SetClusterID(t, c, "beef")
	operatortest.Poke(t, s)
	operatortest.Eventually(t, "the new cluster's worker", func() error {
		p := archivePod(t, s, "/demo/archive/beef")
		if slices.ContainsFunc(p.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--start-revision") }) {
			return fmt.Errorf("the new chain starts at the old one's restart revision: %v", p.Spec.Containers[0].Args)
		}
		return nil
	})

	// Archive off: no worker, no condition.
	operatortest.Eventually(t, "archive off", func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		cur.Spec.Archive = nil
		return k8s.Update(ctx, cur)
	})
	operatortest.Eventually(t, "worker gone", func() error {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.ArchivePodName(s.Name)}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
	operatortest.Eventually(t, "condition gone", func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, ConditionArchiving); c != nil || cur.Status.ArchiveLocation != "" {
			return fmt.Errorf("Archiving %+v, location %q", c, cur.Status.ArchiveLocation)
		}
		return nil
	})
}
