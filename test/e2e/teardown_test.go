//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// TestNamespaceTeardownNeverHangs: a namespace holding a cluster (retaining its volumes), two
// schedules that have made backups to MinIO (one of each snapshotDeletionPolicy) and a one-off
// backup is deleted while the operator runs; it is gone within a minute, no finalizer stripped by
// hand. No Job can start in a namespace being deleted, so the Delete schedule's snapshots stay in
// the bucket and the operator says where; the Retain schedule's and the one-off's stay by design.
func TestNamespaceTeardownNeverHangs(t *testing.T) {
	framework.Parallel(t, 65*time.Second)
	ctx := context.Background()
	// MinIO lives next door: the bucket outlives the namespace, so what stays can be checked.
	storeNS := env.NewNamespace(t, "e2e-teardown-store-")
	mio := env.DeployMinIO(t, storeNS, bucket)
	ns := env.NewNamespace(t, "e2e-teardown-")
	op := env.StartOperator(t, ns, "")
	creds := &corev1.Secret{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: storeNS, Name: mio.Secret}, creds); err != nil {
		t.Fatal(err)
	}
	if err := env.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mio.Secret, Namespace: ns}, Data: creds.Data}); err != nil {
		t.Fatal(err)
	}

	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	c.Spec.Replicas = 1
	c.Spec.Storage.Size, c.Spec.Storage.RetentionPolicy = resource.MustParse("256Mi"), etcdv1alpha1.PVCRetentionRetain
	if err := env.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, c, 1, convergeTimeout)
	framework.PutKeys(t, env.EtcdClient(t, c), "td/", 1000)
	var schedules []*etcdv1alpha1.EtcdBackupSchedule
	for _, p := range []etcdv1alpha1.SnapshotDeletionPolicy{etcdv1alpha1.SnapshotRetain, etcdv1alpha1.SnapshotDelete} {
		s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(string(p)), Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
			Schedule: "* * * * *", KeepLast: 3, SnapshotDeletionPolicy: p,
			Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: mio.Destination(bucket, "teardown")},
		}}
		if err := env.K8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		schedules = append(schedules, s)
	}
	oneOff := waitBackup(t, createBackup(t, ns, "one-off", c.Name, mio.Destination(bucket, "teardown")), etcdv1alpha1.BackupSucceeded, 3*time.Minute)
	framework.WaitFor(t, "a successful backup of each schedule", 3*time.Minute, func() error {
		for _, s := range schedules {
			list := &etcdv1alpha1.EtcdBackupList{}
			if err := env.K8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{naming.LabelSchedule: s.Name}); err != nil {
				return err
			}
			ok := false
			for _, b := range list.Items {
				ok = ok || b.Status.Phase == etcdv1alpha1.BackupSucceeded
			}
			if !ok {
				return fmt.Errorf("schedule %s: none of %d backups succeeded yet", s.Name, len(list.Items))
			}
		}
		return nil
	})
	all := &etcdv1alpha1.EtcdBackupList{}
	if err := env.K8s.List(ctx, all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, b := range all.Items {
		if b.Status.Location != "" {
			stored[strings.TrimPrefix(b.Status.Location, "s3://"+bucket+"/")] = true
		}
	}
	t.Logf("before teardown: %d backups, %d stored snapshots", len(all.Items), len(stored))

	start := time.Now()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := env.K8s.Delete(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "namespace "+ns+" gone", time.Minute, func() error {
		err := env.K8s.Get(ctx, client.ObjectKeyFromObject(nsObj), nsObj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var left []string
		for _, l := range []client.ObjectList{&etcdv1alpha1.EtcdBackupScheduleList{}, &etcdv1alpha1.EtcdBackupList{}, &etcdv1alpha1.EtcdClusterList{}} {
			if err := env.K8s.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
			switch l := l.(type) {
			case *etcdv1alpha1.EtcdBackupScheduleList:
				for _, o := range l.Items {
					left = append(left, "schedule "+o.Name+fmt.Sprint(o.Finalizers))
				}
			case *etcdv1alpha1.EtcdBackupList:
				for _, o := range l.Items {
					left = append(left, "backup "+o.Name+fmt.Sprint(o.Finalizers))
				}
			case *etcdv1alpha1.EtcdClusterList:
				for _, o := range l.Items {
					left = append(left, "cluster "+o.Name+fmt.Sprint(o.Finalizers))
				}
			}
		}
		return fmt.Errorf("phase %s, conditions %+v, left %v", nsObj.Status.Phase, nsObj.Status.Conditions, left)
	})
	t.Logf("namespace deleted in %s", time.Since(start).Round(100*time.Millisecond))

	// Every snapshot is still in the bucket: Retain's and the one-off's by design, Delete's
	// because no Job could delete them, which the operator logged with their locations.
	left := map[string]bool{}
	for _, k := range mio.Keys(t, bucket, "teardown/") {
		left[k] = true
	}
	for k := range stored {
		if !left[k] {
			t.Errorf("snapshot %s is gone", k)
		}
	}
	if !left[strings.TrimPrefix(oneOff.Status.Location, "s3://"+bucket+"/")] {
		t.Errorf("the one-off backup's snapshot %s is gone", oneOff.Status.Location)
	}
	if logs := op.Logs(); !strings.Contains(logs, "is left in place") {
		t.Errorf("the operator did not say which snapshots it left in place; log tail:\n%s", logs[max(0, len(logs)-4096):])
	}
}
