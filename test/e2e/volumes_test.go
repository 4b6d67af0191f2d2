//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// claimSizes maps each member claim of c to the size it asks for.
func claimSizes(c *v1.EtcdCluster) (map[string]string, error) {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := env.K8s.List(context.Background(), pvcs, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pvcs.Items {
		q := p.Spec.Resources.Requests[corev1.ResourceStorage]
		out[p.Name] = q.String()
	}
	return out, nil
}

func growTo(t *testing.T, c *v1.EtcdCluster, size string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"storage":{"size":%q}}}`, size)))
	if err := env.K8s.Patch(context.Background(), env.Get(t, c), patch); err != nil {
		t.Fatal(err)
	}
}

// Issue 14 item 4 on the local cluster, whose provisioner (local-path) cannot grow a volume itself:
//   - on its default class, which does not allow expansion, a larger spec.storage.size is refused
//     with Degraded=VolumeExpansionUnsupported and the next step; no claim is touched;
//   - on a class of the same provisioner that allows expansion, every claim is grown, one per pass,
//     under a writer: the cluster stays available, says it waits for the storage driver, loses nothing.
func TestVolumeGrowth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-volumes-")
	env.StartOperator(t, ns, "")
	yes, wait, del := true, storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-expandable-"}, Provisioner: "rancher.io/local-path",
		AllowVolumeExpansion: &yes, VolumeBindingMode: &wait, ReclaimPolicy: &del}
	if err := env.K8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.K8s.Delete(context.Background(), class) })

	fixed := &v1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: ns}}
	fixed.Spec.Replicas = 1
	fixed.Spec.Storage.Size = resource.MustParse("256Mi")
	if err := env.K8s.Create(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	c := createWith(t, ns, func(c *v1.EtcdCluster) { c.Spec.Storage.StorageClassName = &class.Name })
	env.WaitConverged(t, fixed, 1, convergeTimeout)

	growTo(t, fixed, "512Mi")
	framework.WaitFor(t, "the growth on local-path refused with a reason", time.Minute, func() error {
		d := meta.FindStatusCondition(env.Get(t, fixed).Status.Conditions, v1.ConditionDegraded)
		if d == nil || d.Reason != "VolumeExpansionUnsupported" || !strings.Contains(d.Message, "StorageClass local-path does not allow volume expansion") {
			return fmt.Errorf("Degraded = %+v", d)
		}
		return nil
	})
	if sizes, err := claimSizes(fixed); err != nil || sizes["fixed-0"] != "256Mi" {
		t.Fatalf("claims %v (%v), want fixed-0 untouched at 256Mi", sizes, err)
	}

	cl := env.EtcdClient(t, c)
	stop := framework.FollowPods(cl, func() ([]string, error) { return env.CurrentEndpoints(c) })
	w := framework.StartWriter(cl, "/grow/")
	start := time.Now()
	growTo(t, c, "512Mi")
	framework.WaitFor(t, "every claim asks for 512Mi", 2*time.Minute, func() error {
		sizes, err := claimSizes(c)
		if err != nil {
			return err
		}
		for name, size := range sizes {
			if size != "512Mi" {
				return fmt.Errorf("claim %s asks for %s (%v)", name, size, sizes)
			}
		}
		return nil
	})
	grown := time.Since(start)
	framework.WaitFor(t, "the cluster says it waits for the storage driver", time.Minute, func() error {
		got := env.Get(t, c)
		p := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionProgressing)
		if p == nil || p.Reason != "ExpandingVolumes" || !strings.Contains(p.Message, "waiting for the storage driver") {
			return fmt.Errorf("Progressing = %+v", p)
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionAvailable) || got.Status.ReadyReplicas != 3 {
			return fmt.Errorf("not available with 3 ready members: %d ready", got.Status.ReadyReplicas)
		}
		return nil
	})
	acked, failed := env.StopWriter(t, w, stop, cl, c)
	t.Logf("3 claims grown in %s; writer %d acknowledged, %d failed attempts (retried)", grown.Round(time.Second), len(acked), failed)
	framework.CheckKeys(t, cl, "/grow/", acked)
}
