package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// Issue 14 item 4: spec.storage.size grown on a cluster whose StorageClass cannot grow volumes is
// reported (Degraded=VolumeExpansionUnsupported, a Warning event, the next step in the message),
// and no claim is touched. The class is read past the cache, with the role's storageclasses get.
func TestVolumeGrowthRefusedByTheStorageClassIsReported(t *testing.T) {
	ctx := context.Background()
	no := false
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "fixed-size-"}, Provisioner: "example.com/fixed", AllowVolumeExpansion: &no}
	if err := k8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), class) })
	for _, tc := range []struct {
		name, class, says string
	}{
		{"class without expansion", class.Name, "StorageClass " + class.Name + " does not allow volume expansion"},
		{"class that does not exist", "gone", "StorageClass gone of the volumes of demo-0, demo-1, demo-2 does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := operatortest.NewNamespace(t)
			c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = &tc.class })
			operatortest.Eventually(t, "three member claims", func() error {
				pvcs := &corev1.PersistentVolumeClaimList{}
				if err := k8s.List(ctx, pvcs, client.InNamespace(ns)); err != nil {
					return err
				}
				if len(pvcs.Items) != 3 {
					return fmt.Errorf("%d claims", len(pvcs.Items))
				}
				return nil
			})
			grow := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storage":{"size":"2Gi"}}}`))
			if err := k8s.Patch(ctx, operatortest.Get(t, c), grow); err != nil {
				t.Fatal(err)
			}
			operatortest.Eventually(t, "Degraded VolumeExpansionUnsupported", func() error {
				d := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
				if d == nil || d.Reason != "VolumeExpansionUnsupported" || !strings.Contains(d.Message, tc.says) || !strings.Contains(d.Message, "2Gi") {
					return fmt.Errorf("Degraded = %+v", d)
				}
				return nil
			})
			operatortest.Eventually(t, "a Warning event", func() error {
				evs := &corev1.EventList{}
				if err := k8s.List(ctx, evs, client.InNamespace(ns)); err != nil {
					return err
				}
				for _, e := range evs.Items {
					if e.Reason == "VolumeExpansionUnsupported" && e.Type == corev1.EventTypeWarning {
						return nil
					}
				}
				return fmt.Errorf("%d events, none VolumeExpansionUnsupported", len(evs.Items))
			})
			for i := range 3 {
				pvc := &corev1.PersistentVolumeClaim{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.MemberName(c.Name, int32(i))}, pvc); err != nil {
					t.Fatal(err)
				}
				if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 {
					t.Errorf("claim %s asks for %s, want it untouched at 1Gi", pvc.Name, got.String())
				}
			}
		})
	}
}
