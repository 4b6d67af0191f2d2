package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// snapshotClaim makes the claim a restore reads, ReadWriteOnce like most attachable storage.
func snapshotClaim(t *testing.T, ns, name string, mode corev1.PersistentVolumeMode) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: ptr.To(mode),
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	if err := k8s.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
}

// restoreReaders lists, once the first restoring member pod exists, the member pods that read the
// snapshot (those with the restore init container) and the members recorded for the bootstrap.
// The members are recorded before any pod is made, so they are final by then.
func restoreReaders(t *testing.T, c *etcdv1alpha1.EtcdCluster) (readers []corev1.Pod, members []string) {
	t.Helper()
	ctx := context.Background()
	operatortest.Eventually(t, "a restoring member pod", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		readers = nil
		for _, p := range pods.Items {
			for _, ic := range p.Spec.InitContainers {
				if ic.Name == resources.RestoreContainer {
					readers = append(readers, p)
				}
			}
		}
		if len(readers) == 0 {
			return fmt.Errorf("%d pods, none restoring", len(pods.Items))
		}
		return nil
	})
	for _, m := range operatortest.Get(t, c).Status.Members {
		members = append(members, m.Name)
	}
	return readers, members
}

func mountsClaim(p corev1.Pod, claim string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// TestRestoreFromAClaimMountsItInOneMemberOnly: a ReadWriteOnce claim attaches to one node, so
// three members mounting it leave two in ContainerCreating (Multi-Attach), and a node-local claim
// would pin all three to its node. The cluster starts as one member restored from the claim; the
// others join it as learners and never mount the claim.
func TestRestoreFromAClaimMountsItInOneMemberOnly(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	snapshotClaim(t, ns, "snaps", corev1.PersistentVolumeFilesystem)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{Source: &etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "latest.db"}}}}
	})
	readers, members := restoreReaders(t, c)
	if len(members) != 1 || len(readers) != 1 || readers[0].Name != members[0] || !mountsClaim(readers[0], "snaps") {
		t.Fatalf("members %v, restoring pods %d: want one member restoring from the claim", members, len(readers))
	}
}

// TestRestoreFromAnObjectWithoutChecksumReadsItOnce: an object each member fetched itself could be
// replaced between two fetches ("latest.db"), giving members different keyspaces under one cluster
// ID. Without a SHA-256 to hold them to, one member reads it; with one, every member fetches and
// checks it.
func TestRestoreFromAnObjectWithoutChecksumReadsItOnce(t *testing.T) {
	for _, tc := range []struct {
		name, sha256 string
		readers      int
	}{
		{"without sha256", "", 1},
		{"with sha256", strings.Repeat("ab", 32), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := operatortest.NewNamespace(t)
			src := operatortest.S3Dest()
			src.S3.Prefix = "prod/latest.db"
			c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{Source: &src, SHA256: tc.sha256}}
			})
			readers, members := restoreReaders(t, c)
			if len(members) != tc.readers {
				t.Fatalf("members %v: want %d restoring from the object", members, tc.readers)
			}
			for _, p := range readers {
				args := strings.Join(p.Spec.InitContainers[len(p.Spec.InitContainers)-1].Args, " ")
				if tc.sha256 != "" && !strings.Contains(args, "--sha256="+tc.sha256) {
					t.Errorf("%s restores without checking the SHA-256: %s", p.Name, args)
				}
			}
		})
	}
}

// TestRestoreFromAClaimNoPodCanReadStartsNothing: a claim that does not exist, or a raw block
// volume, is refused before any member is recorded or started, in the Restored condition and an
// event; once the claim is there the restore starts by itself.
func TestRestoreFromAClaimNoPodCanReadStartsNothing(t *testing.T) {
	ctx := context.Background()
	fromClaim := func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{Source: &etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "latest.db"}}}}
	}
	refused := func(c *etcdv1alpha1.EtcdCluster, what string) {
		t.Helper()
		operatortest.Eventually(t, "refused: "+what, func() error {
			cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionRestored)
			if cond == nil || cond.Reason != string(reason.RestoreSourceUnusable) || !strings.Contains(cond.Message, what) {
				return fmt.Errorf("Restored = %+v", cond)
			}
			return nil
		})
		operatortest.Eventually(t, "a warning event", func() error {
			evs := &corev1.EventList{}
			if err := k8s.List(ctx, evs, client.InNamespace(c.Namespace)); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == string(reason.RestoreSourceUnusable) && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == c.Name {
					return nil
				}
			}
			return fmt.Errorf("%d events, none %s", len(evs.Items), reason.RestoreSourceUnusable)
		})
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace)); err != nil {
			t.Fatal(err)
		}
		if n, members := len(pods.Items), operatortest.Get(t, c).Status.Members; n != 0 || len(members) != 0 {
			t.Fatalf("%d pods and members %v with a claim no pod can read", n, members)
		}
	}

	missing := operatortest.NewCluster(t, operatortest.NewNamespace(t), fromClaim)
	refused(missing, "does not exist")
	snapshotClaim(t, missing.Namespace, "snaps", corev1.PersistentVolumeFilesystem)
	if readers, members := restoreReaders(t, missing); len(members) != 1 || len(readers) != 1 {
		t.Fatalf("members %v, %d restoring pods once the claim exists: want one", members, len(readers))
	}
	operatortest.Eventually(t, "Restored=False Restoring", func() error {
		if cond := meta.FindStatusCondition(operatortest.Get(t, missing).Status.Conditions, etcdv1alpha1.ConditionRestored); cond == nil || cond.Reason != string(reason.Restoring) {
			return fmt.Errorf("Restored = %+v", cond)
		}
		return nil
	})

	ns := operatortest.NewNamespace(t)
	snapshotClaim(t, ns, "snaps", corev1.PersistentVolumeBlock)
	refused(operatortest.NewCluster(t, ns, fromClaim), "raw block volume")
}

// succeededBackup records backup name of cluster demo as succeeded at revision rev, taken from etcd
// cluster clusterID ("" as before archives existed), to S3.
func succeededBackup(t *testing.T, ns, name, clusterID string, rev int64) {
	t.Helper()
	ctx := context.Background()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "backup "+name+" succeeded", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		done := metav1.Now()
		b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &done, CompletionTime: &done, Revision: rev,
			Size: 4096, SHA256: strings.Repeat("ab", 32), Location: "s3://backups/prod/" + ns + "/demo/" + name + ".db", ClusterID: clusterID}
		return k8s.Status().Update(ctx, b)
	})
}

// TestPointInTimeRestoreReplaysOnOneMember: a restore to a point in time replays the archive that
// continues the backup on one member (the others join it), with the chain beside the snapshot and
// the target; a target before the backup, or a backup that records no etcd cluster ID, is refused
// before any member is recorded or started.
func TestPointInTimeRestoreReplaysOnOneMember(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	succeededBackup(t, ns, "base", "c0ffee", 500)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "base", PointInTime: &etcdv1alpha1.PointInTimeSpec{Revision: 750}}}
	})
	readers, members := restoreReaders(t, c)
	if len(members) != 1 || len(readers) != 1 {
		t.Fatalf("members %v, %d restoring pods: want one member replaying", members, len(readers))
	}
	args := strings.Join(readers[0].Spec.InitContainers[len(readers[0].Spec.InitContainers)-1].Args, " ")
	for _, want := range []string{"--archive-prefix=prod/" + ns + "/demo/archive/c0ffee", "--target-revision=750", "--sha256="} {
		if !strings.Contains(args, want) {
			t.Errorf("restore args %q lack %q", args, want)
		}
	}

	for name, tc := range map[string]struct {
		clusterID string
		revision  int64
		want      string
	}{
		"target before the backup": {"c0ffee", 499, "before EtcdBackup"},
		"no cluster ID":            {"", 750, "records no cluster ID"},
	} {
		t.Run(name, func(t *testing.T) {
			ns := operatortest.NewNamespace(t)
			succeededBackup(t, ns, "base", tc.clusterID, 500)
			c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "base", PointInTime: &etcdv1alpha1.PointInTimeSpec{Revision: tc.revision}}}
			})
			operatortest.Eventually(t, "refused", func() error {
				cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionRestored)
				if cond == nil || cond.Reason != string(reason.BackupNotReady) || !strings.Contains(cond.Message, tc.want) {
					return fmt.Errorf("Restored = %+v", cond)
				}
				return nil
			})
			pods := &corev1.PodList{}
			if err := k8s.List(context.Background(), pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 0 || len(operatortest.Get(t, c).Status.Members) != 0 {
				t.Fatalf("%d pods (%v), members %v: want nothing started", len(pods.Items), err, operatortest.Get(t, c).Status.Members)
			}
		})
	}
}

// TestRecoveryFromBackupReplaysTheArchiveOrFallsBack: a FromBackup recovery whose schedule archives
// the lost etcd cluster records that archive when it starts (archiveOf) and replays it to its end on
// one member; when the replay reports the archive unusable (a broken chain), the recovery drops the
// archive in status, with an event, and the member restores the backup alone.
func TestRecoveryFromBackupReplaysTheArchiveOrFallsBack(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	succeededBackup(t, ns, "base", "c0ffee", 500)
	loc := "s3://backups/prod/" + ns + "/demo/archive/c0ffee"
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.Paused = true })

	// archiveOf: only a schedule of this cluster archiving exactly that chain counts.
	p := &pass{r: &EtcdClusterReconciler{Client: k8s}, c: operatortest.Get(t, c)}
	if got, err := p.archiveOf(ctx, "base"); err != nil || got != "" {
		t.Fatalf("without an archiving schedule: %q, %v", got, err)
	}
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "@daily", Archive: &etcdv1alpha1.ArchiveSpec{}, Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "the schedule archiving the lost cluster", func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		cur.Status.ArchiveLocation = loc
		return k8s.Status().Update(ctx, cur)
	})
	operatortest.Eventually(t, "archiveOf finds it", func() error {
		if got, err := p.archiveOf(ctx, "base"); err != nil || got != loc {
			return fmt.Errorf("%q, %w", got, err)
		}
		return nil
	})

	// The recovery as StartRecovery and RestartFromBackup leave it.
	operatortest.Eventually(t, "recovery restoring", func() error {
		cur := operatortest.Get(t, c)
		cur.Status.Bootstrapped, cur.Status.NextMemberIndex, cur.Status.ClusterToken = false, 3, "demo-3"
		cur.Status.Recovery = &etcdv1alpha1.QuorumRecovery{Source: "FromBackup", Phase: "Restoring", Backup: "base", Archive: loc, StartedAt: metav1.Now()}
		return k8s.Status().Update(ctx, cur)
	})
	operatortest.Eventually(t, "resume", func() error {
		cur := operatortest.Get(t, c)
		cur.Spec.Maintenance.Paused = false
		return k8s.Update(ctx, cur)
	})
	readers, _ := restoreReaders(t, c)
	args := strings.Join(readers[0].Spec.InitContainers[len(readers[0].Spec.InitContainers)-1].Args, " ")
	if len(readers) != 1 || !strings.Contains(args, "--archive-prefix=prod/"+ns+"/demo/archive/c0ffee") || strings.Contains(args, "--target-") {
		t.Fatalf("%d restoring pods, args %q: want one replaying the archive to its end", len(readers), args)
	}

	// The replay finds the chain broken.
	operatortest.Eventually(t, "the replay fails", func() error {
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(&readers[0]), pod); err != nil {
			return err
		}
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.RestoreContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 2, Message: `{"reason":"ArchiveChainBroken","message":"archive chain: Gap at s3://backups/x: revisions 501 to 600 are missing"}`}}}}
		return k8s.Status().Update(ctx, pod)
	})
	operatortest.Eventually(t, "the archive dropped, the backup restored alone", func() error {
		if a := operatortest.Get(t, c).Status.Recovery.Archive; a != "" {
			return fmt.Errorf("recovery still replays %s", a)
		}
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		restoring := 0
		for _, p := range pods.Items {
			for _, ic := range p.Spec.InitContainers {
				if ic.Name != resources.RestoreContainer {
					continue
				}
				if strings.Contains(strings.Join(ic.Args, " "), "--archive-") {
					return fmt.Errorf("pod %s still replays the archive", p.Name)
				}
				restoring++
			}
		}
		// The bootstrap's members were recorded for one reader: that member restores the backup
		// alone and the others join it once it serves.
		if restoring != 1 {
			return fmt.Errorf("%d members restoring the backup, want the recorded one", restoring)
		}
		return nil
	})
}
