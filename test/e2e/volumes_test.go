//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// expandableClass is the local cluster's StorageClass whose CSI driver grows volumes online
// (hack/cluster/up.sh, hack/tools/csi).
const expandableClass = "csi-hostpath-expandable"

// claims lists the member claims of c.
func claims(c *etcdv1alpha1.EtcdCluster) ([]corev1.PersistentVolumeClaim, error) {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := env.K8s.List(context.Background(), pvcs, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return nil, err
	}
	return pvcs.Items, nil
}

// claimSizes maps each member claim of c to the size it asks for.
func claimSizes(c *etcdv1alpha1.EtcdCluster) (map[string]string, error) {
	items, err := claims(c)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range items {
		q := p.Spec.Resources.Requests[corev1.ResourceStorage]
		out[p.Name] = q.String()
	}
	return out, nil
}

// grownOnline says why not every member claim of c has reached size with its file system grown.
func grownOnline(c *etcdv1alpha1.EtcdCluster, size resource.Quantity) error {
	items, err := claims(c)
	if err != nil {
		return err
	}
	if len(items) != int(c.Spec.Replicas) {
		return fmt.Errorf("%d claims, want %d", len(items), c.Spec.Replicas)
	}
	for _, p := range items {
		req, capacity := p.Spec.Resources.Requests[corev1.ResourceStorage], p.Status.Capacity[corev1.ResourceStorage]
		if req.Cmp(size) != 0 || capacity.Cmp(size) != 0 {
			return fmt.Errorf("claim %s asks for %s and has %s", p.Name, req.String(), capacity.String())
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending || cond.Type == corev1.PersistentVolumeClaimResizing {
				return fmt.Errorf("claim %s still has %s=%s", p.Name, cond.Type, cond.Status)
			}
		}
	}
	return nil
}

func growTo(t *testing.T, c *etcdv1alpha1.EtcdCluster, size string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"storage":{"size":%q}}}`, size)))
	if err := env.K8s.Patch(context.Background(), env.Get(t, c), patch); err != nil {
		t.Fatal(err)
	}
}

// Issue 14 item 4 on the local cluster:
//   - on local-path (which does not allow expansion) a larger spec.storage.size is
//     refused with Degraded=VolumeExpansionUnsupported and the next step; no claim is touched;
//   - on csi-hostpath-expandable, whose CSI driver grows mounted volumes (ONLINE expansion), every
//     claim of a 3-member cluster under a writer is grown one per pass, the kubelet grows each file
//     system while its member runs (no FileSystemResizePending left, no member restarted for it), the
//     derived database quota is then raised and rolled into the members one at a time, Progressing
//     says ExpandingVolumes while this goes on and something else after, and no acknowledged write is lost.
func TestVolumeGrowth(t *testing.T) {
	framework.Parallel(t, 135*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-volumes-")
	env.StartOperator(t, ns, "")
	sc := &storagev1.StorageClass{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Name: expandableClass}, sc); err != nil {
		t.Fatalf("StorageClass %s (hack/cluster/up.sh makes it): %v", expandableClass, err)
	}

	fixed := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: ns}}
	fixed.Spec.Replicas = 1
	fixed.Spec.Storage.Size = resource.MustParse("256Mi")
	localPath := "local-path" // named: the one-node cluster's default class is the expandable one
	fixed.Spec.Storage.StorageClassName = &localPath
	if err := env.K8s.Create(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	class := expandableClass
	c := createWith(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = &class })
	env.WaitConverged(t, fixed, 1, convergeTimeout)

	growTo(t, fixed, "512Mi")
	framework.WaitFor(t, "the growth on local-path refused with a reason", time.Minute, func() error {
		d := meta.FindStatusCondition(env.Get(t, fixed).Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Reason != "VolumeExpansionUnsupported" || !strings.Contains(d.Message, "StorageClass local-path does not allow volume expansion") {
			return fmt.Errorf("Degraded = %+v", d)
		}
		return nil
	})
	if sizes, err := claimSizes(fixed); err != nil || sizes["fixed-0"] != "256Mi" {
		t.Fatalf("claims %v (%v), want fixed-0 untouched at 256Mi", sizes, err)
	}

	oldQuota := env.Get(t, c).Status.QuotaBackendBytes
	size := resource.MustParse("512Mi")
	newQuota := resources.DerivedQuota(size.Value())
	if oldQuota == 0 || oldQuota >= newQuota {
		t.Fatalf("recorded quota %d, want one below %d", oldQuota, newQuota)
	}
	pods := env.MemberPodUIDs(t, c)

	// Sampled throughout: the Progressing reasons shown, the most member pods down at once (missing,
	// terminating or not Ready, as the kubelet's /readyz probe finds them: what the client Service
	// routes to), and the fewest ready members status reported, with what it said of each member then.
	var mu sync.Mutex
	reasons, mostDown, minReady, atMinReady := map[string]bool{}, 0, int32(3), ""
	sample := framework.Every(250*time.Millisecond, func() {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			return
		}
		down, err := membersDown(c, pods)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if p := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionProgressing); p != nil && p.Status == metav1.ConditionTrue {
			reasons[p.Reason+": "+p.Message] = true
		}
		mostDown = max(mostDown, down)
		if r := got.Status.ReadyReplicas; r < minReady {
			minReady, atMinReady = r, fmt.Sprintf("%d member pods down; status members %+v", down, got.Status.Members)
		}
	})
	defer sample()

	cl := env.EtcdClient(t, c)
	stop := framework.FollowPods(cl, func() ([]string, error) { return env.CurrentEndpoints(c) })
	w := framework.StartWriter(cl, "/grow/")
	start := time.Now()
	growTo(t, c, size.String())
	framework.WaitFor(t, "every claim grown to 512Mi, its file system too", 3*time.Minute, func() error {
		if err := grownOnline(c, size); err != nil {
			return err
		}
		// The quota is raised only after every volume has grown, and members are rolled for it only
		// after that, so a pod replaced while the old quota is still recorded (read after the pods) was
		// a restart for the volumes: the expansion would not have been online.
		if now := env.MemberPodUIDs(t, c); !maps.Equal(now, pods) && env.Get(t, c).Status.QuotaBackendBytes == oldQuota {
			t.Fatalf("member pods replaced while the volumes grew (%v -> %v): the expansion was not online", pods, now)
		}
		return nil
	})
	grown := time.Since(start)

	framework.WaitFor(t, "the derived quota raised in status", 3*time.Minute, func() error {
		if q := env.Get(t, c).Status.QuotaBackendBytes; q != newQuota {
			return fmt.Errorf("status quota %d, want %d", q, newQuota)
		}
		return nil
	})
	// Every member is rolled for the new quota: a wait that fails on a stalled roll, not on a long one.
	env.WaitConverged(t, c, 3, convergeTimeout)
	framework.WaitFor(t, "the derived quota in every member", time.Minute, func() error {
		podList := &corev1.PodList{}
		if err := env.K8s.List(ctx, podList, client.InNamespace(ns), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
			return err
		}
		flag := fmt.Sprintf("--quota-backend-bytes=%d", newQuota)
		for _, p := range podList.Items {
			if !slices.ContainsFunc(p.Spec.Containers, func(ctr corev1.Container) bool { return slices.Contains(ctr.Args, flag) }) {
				return fmt.Errorf("pod %s runs without %s", p.Name, flag)
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := cl.Status(sctx, naming.EndpointForIP(p.Status.PodIP, true))
			cancel()
			if err != nil {
				return fmt.Errorf("status of %s: %w", p.Name, err)
			}
			if st.DbSizeQuota != newQuota {
				return fmt.Errorf("member %s runs with a quota of %d, want %d", p.Name, st.DbSizeQuota, newQuota)
			}
		}
		return nil
	})
	framework.WaitFor(t, "Progressing no longer ExpandingVolumes", time.Minute, func() error {
		if p := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionProgressing); p != nil && p.Reason == "ExpandingVolumes" {
			return fmt.Errorf("Progressing = %+v", p)
		}
		return nil
	})
	if err := grownOnline(c, size); err != nil {
		t.Fatalf("after the quota roll: %v", err)
	}
	sample()
	acked, failed := env.StopWriter(t, w, stop, cl, c)

	mu.Lock()
	defer mu.Unlock()
	var expanding []string
	for r := range reasons {
		if strings.HasPrefix(r, "ExpandingVolumes: ") {
			expanding = append(expanding, r)
		}
		if strings.Contains(r, "grow when the members restart") {
			t.Errorf("members restarted for their file systems (%q): the driver grows them online", r)
		}
	}
	if len(expanding) == 0 {
		t.Errorf("Progressing never said ExpandingVolumes; seen: %v", slices.Collect(maps.Keys(reasons)))
	}
	if mostDown > 1 {
		t.Errorf("as many as %d member pods down at once during the growth and the quota roll, want one at most", mostDown)
	}
	t.Logf("3 claims grown online in %s; quota %d -> %d rolled; Progressing: %v; writer %d acknowledged, %d failed attempts (retried); "+
		"at most %d member pods down at once; status reported as few as %d ready members (%s)",
		grown.Round(time.Second), oldQuota, newQuota, expanding, len(acked), failed, mostDown, minReady, atMinReady)
	framework.CheckWrites(t, cl, w)
}
