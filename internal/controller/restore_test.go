package controller

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
	eventually(t, "a restoring member pod", func() error {
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
	for _, m := range get(t, c).Status.Members {
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
	ns := newNamespace(t)
	snapshotClaim(t, ns, "snaps", corev1.PersistentVolumeFilesystem)
	c := newCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
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
			ns := newNamespace(t)
			src := s3Dest()
			src.S3.Prefix = "prod/latest.db"
			c := newCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
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
		eventually(t, "refused: "+what, func() error {
			cond := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionRestored)
			if cond == nil || cond.Reason != string(reason.RestoreSourceUnusable) || !strings.Contains(cond.Message, what) {
				return fmt.Errorf("Restored = %+v", cond)
			}
			return nil
		})
		eventually(t, "a warning event", func() error {
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
		if n, members := len(pods.Items), get(t, c).Status.Members; n != 0 || len(members) != 0 {
			t.Fatalf("%d pods and members %v with a claim no pod can read", n, members)
		}
	}

	missing := newCluster(t, newNamespace(t), fromClaim)
	refused(missing, "does not exist")
	snapshotClaim(t, missing.Namespace, "snaps", corev1.PersistentVolumeFilesystem)
	if readers, members := restoreReaders(t, missing); len(members) != 1 || len(readers) != 1 {
		t.Fatalf("members %v, %d restoring pods once the claim exists: want one", members, len(readers))
	}
	eventually(t, "Restored=False Restoring", func() error {
		if cond := meta.FindStatusCondition(get(t, missing).Status.Conditions, etcdv1alpha1.ConditionRestored); cond == nil || cond.Reason != string(reason.Restoring) {
			return fmt.Errorf("Restored = %+v", cond)
		}
		return nil
	})

	ns := newNamespace(t)
	snapshotClaim(t, ns, "snaps", corev1.PersistentVolumeBlock)
	refused(newCluster(t, ns, fromClaim), "raw block volume")
}
