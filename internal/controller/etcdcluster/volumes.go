package etcdcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// volumeSize is the size member volumes should have; 0 for in-memory members.
func volumeSize(c *etcdv1alpha1.EtcdCluster) int64 {
	if c.Spec.Storage.Medium == etcdv1alpha1.StorageMediumMemory {
		return 0
	}
	return c.Spec.Storage.Size.Value()
}

// pvcState is what the planner needs of a member claim.
func pvcState(pvc *corev1.PersistentVolumeClaim) planner.PVCState {
	s := planner.PVCState{Exists: true, Deleting: pvc.DeletionTimestamp != nil}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		s.Requested = q.Value()
	}
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		s.Capacity = q.Value()
	}
	for _, cond := range pvc.Status.Conditions {
		if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending && cond.Status == corev1.ConditionTrue {
			s.ResizePending, s.ResizePendingSince = true, cond.LastTransitionTime.Time
		}
	}
	return s
}

// volumesInput is planner.Volumes for this pass.
func (p *pass) volumesInput() planner.Volumes {
	c := p.c
	v := planner.Volumes{Size: volumeSize(c), Refusal: p.obs.volumeRefusal, Quota: c.Status.QuotaBackendBytes}
	if c.Spec.Etcd.QuotaBackendBytes == 0 && v.Size > 0 {
		v.GrownQuota = resources.DerivedQuota(v.Size)
	}
	return v
}

// observeVolumeClass says why the member claims cannot grow to spec.storage.size, "" when they
// can or need not. Kubernetes refuses to grow a claim whose StorageClass does not set
// allowVolumeExpansion; the class is read only while a claim is smaller than the spec asks, and the
// answer is reported instead of sending a patch the API server would refuse on every pass.
func (p *pass) observeVolumeClass(ctx context.Context, pvcs map[string]*corev1.PersistentVolumeClaim) string {
	size := volumeSize(p.c)
	var small []string
	var class string
	for _, name := range slices.Sorted(maps.Keys(pvcs)) {
		pvc := pvcs[name]
		if pvc.DeletionTimestamp == nil && pvcState(pvc).Requested < size {
			small = append(small, name)
			if pvc.Spec.StorageClassName != nil {
				class = *pvc.Spec.StorageClassName
			}
		}
	}
	if len(small) == 0 {
		return ""
	}
	want := resource.NewQuantity(size, resource.BinarySI).String()
	if class == "" {
		return fmt.Sprintf("spec.storage.size asks for %s, but the volumes of %s have no StorageClass, so Kubernetes cannot grow them; set spec.storage.size back to their size, or restore from a backup into a cluster with a StorageClass that allows expansion", want, strings.Join(small, ", "))
	}
	sc := &storagev1.StorageClass{}
	switch err := p.r.apiReader.Get(ctx, client.ObjectKey{Name: class}, sc); {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("spec.storage.size asks for %s, but StorageClass %s of the volumes of %s does not exist, so Kubernetes cannot grow them", want, class, strings.Join(small, ", "))
	case err != nil:
		// Not knowing is no reason to stop the pass: the growth waits, and says why.
		return fmt.Sprintf("spec.storage.size asks for %s, but the operator cannot tell whether StorageClass %s allows volume expansion: %v", want, class, err)
	case sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion:
		return fmt.Sprintf("spec.storage.size asks for %s, but StorageClass %s does not allow volume expansion (allowVolumeExpansion is not true), so the volumes of %s keep their size; set spec.storage.size back, or have an administrator enable expansion on the class if its driver supports it", want, class, strings.Join(small, ", "))
	}
	return ""
}

// expandVolume raises a member claim's request to spec.storage.size; the storage driver does the rest.
func (p *pass) expandVolume(ctx context.Context, member string) error {
	pvc := p.obs.pvcs[member]
	if pvc == nil {
		return fmt.Errorf("member %s has no volume claim", member)
	}
	grown := pvc.DeepCopy()
	if grown.Spec.Resources.Requests == nil {
		grown.Spec.Resources.Requests = corev1.ResourceList{}
	}
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = p.c.Spec.Storage.Size
	if err := p.r.Patch(ctx, grown, client.MergeFrom(pvc)); err != nil {
		return fmt.Errorf("grow the volume claim of %s to %s: %w", member, p.c.Spec.Storage.Size.String(), err)
	}
	return nil
}

// volumesGrowing lists the members whose volume has not reached spec.storage.size yet although
// its claim asks for it (the driver is working on it), for the Progressing condition.
func (p *pass) volumesGrowing() []string {
	size := volumeSize(p.c)
	var names []string
	for name, pvc := range p.obs.pvcs {
		if s := pvcState(pvc); !s.Deleting && s.Requested >= size && s.Capacity < size {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
