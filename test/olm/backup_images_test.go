//go:build e2e

package olm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const backupTimeout = 5 * time.Minute

// checkBackupImagesFromCSV makes, beside the converged cluster c of an operator OLM installed in
// opNS, every pod the operator creates apart from members: an EtcdBackup's Job; a schedule's backup
// Jobs, its test-restore Job (etcd image, the worker copied in by an init container) and its archive
// worker; and a cluster restored from the backup (its member's restore init containers). Then every
// image of all of them, and of the members, must be one the CSV lists in spec.relatedImages, and
// each of those pods and Jobs must have been among the ones checked.
func checkBackupImagesFromCSV(t *testing.T, opNS string, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx := context.Background()
	ns := c.Namespace
	const bucket = "etcd-backups"
	mio := env.DeployMinIO(t, ns, bucket)
	framework.PutKeys(t, env.EtcdClient(t, c), "bk/", 100)

	manual := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: mio.Destination(bucket, "manual")}}
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "minutely", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "* * * * *", KeepLast: 3, Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: mio.Destination(bucket, "sched")},
		Verify: &etcdv1alpha1.VerifySpec{Schedule: "* * * * *"}, Archive: &etcdv1alpha1.ArchiveSpec{},
	}}
	for _, o := range []client.Object{manual, sched} {
		if err := env.K8s.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	framework.WaitFor(t, "backup "+manual.Name+" Succeeded", backupTimeout, func() error {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(manual), manual); err != nil {
			return err
		}
		switch manual.Status.Phase {
		case etcdv1alpha1.BackupSucceeded:
			return nil
		case etcdv1alpha1.BackupFailed:
			t.Fatalf("backup %s failed: %+v", manual.Name, manual.Status.Conditions)
		}
		return fmt.Errorf("phase %q", manual.Status.Phase)
	})
	restored := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns}}
	restored.Spec.Replicas, restored.Spec.Version = 1, c.Spec.Version
	// The member volume holds the downloaded snapshot and the restored data side by side.
	restored.Spec.Storage.Size = resource.MustParse("512Mi")
	restored.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: manual.Name}}
	if err := env.K8s.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}

	// A scheduled backup's test-restore Job made (whatever its outcome: its images are what counts
	// here) and the archive worker running.
	var verifyJob string
	framework.WaitFor(t, "a scheduled backup's test-restore Job and the archive worker", backupTimeout, func() error {
		backups := &etcdv1alpha1.EtcdBackupList{}
		if err := env.K8s.List(ctx, backups, client.InNamespace(ns), client.MatchingLabels{naming.LabelSchedule: sched.Name}); err != nil {
			return err
		}
		for _, b := range backups.Items {
			if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.VerifyJobName(b.Name)}, &batchv1.Job{}); err == nil {
				verifyJob = resources.VerifyJobName(b.Name)
			}
		}
		if verifyJob == "" {
			return fmt.Errorf("no test-restore Job for any of the schedule's %d backups", len(backups.Items))
		}
		pod := &corev1.Pod{}
		if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.ArchivePodName(sched.Name)}, pod); err != nil {
			return fmt.Errorf("archive worker: %w", err)
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("archive worker %s", pod.Status.Phase)
		}
		return nil
	})
	env.WaitConverged(t, restored, 1, clusterTimeout)

	checked := checkImagesFromCSV(t, opNS, currentCSV, []string{ns})
	want := []string{
		"Job " + resources.BackupJobName(manual.Name) + "/" + resources.BackupContainer,
		"Job " + verifyJob + "/" + resources.BackupContainer,
		"pod " + resources.ArchivePodName(sched.Name) + "/" + resources.ArchiveContainer,
		"pod " + naming.MemberName(restored.Name, 0) + "/" + resources.RestoreContainer,
	}
	for _, w := range want {
		if !checked[w] {
			t.Errorf("%s was not among the containers checked: %v", w, slices.Sorted(maps.Keys(checked)))
		}
	}
	// A verify Job's init container copies the worker from the operator image into the etcd one.
	verifyPod := "Job " + verifyJob + "/"
	scheduled := "Job " + resources.BackupJobName(sched.Name+"-") // a schedule names its backups after itself
	var verifyContainers, scheduledJobs int
	for k := range checked {
		if strings.HasPrefix(k, verifyPod) {
			verifyContainers++
		}
		if strings.HasPrefix(k, scheduled) {
			scheduledJobs++
		}
	}
	if verifyContainers < 2 || scheduledJobs == 0 {
		t.Errorf("checked %d containers of the test-restore Job (want its init container and etcd's) and %d scheduled backup Jobs (want one or more): %v",
			verifyContainers, scheduledJobs, slices.Sorted(maps.Keys(checked)))
	}
	t.Logf("%d containers of pods and Jobs in %s run images the CSV lists", len(checked), ns)
}
