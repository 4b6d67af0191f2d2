package etcdcluster

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// CacheOptions is the manager's cache: the EtcdClusters, EtcdBackups and EtcdBackupSchedules of
// the watched namespaces (nil: all), and of the kinds the operator creates only the objects it
// labelled app.kubernetes.io/managed-by=etcd-autopilot. Without the filter the informers would hold
// every Secret, Pod, PVC, Service, PDB and Job of the watched namespaces — on a large cluster in
// AllNamespaces mode that is most of its memory, and every user's secrets. What the operator reads
// that it did not make (the S3 credentials an EtcdBackup names) it reads from the API server. Nodes
// (for the zones of the members' placement) are cached cut down to what is read of them (slimNode).
// No cached object keeps its managedFields: nothing in the operator reads them, they are a large
// part of every object's metadata (an eighth of the heap a cluster adds), and an update sent
// without them leaves the server's as they are.
func CacheOptions(namespaces map[string]cache.Config) cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{naming.LabelManagedBy: naming.ManagedBy})}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range ownedKinds() {
		byObject[obj] = owned
	}
	// A ByObject transform replaces the default one; slimNode drops managedFields with the rest.
	byObject[&corev1.Node{}] = cache.ByObject{Transform: slimNode}
	return cache.Options{DefaultNamespaces: namespaces, ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields()}
}

// ownedKinds are the built-in kinds the operator creates, each labelled with naming.Labels
// (internal/resources): member Pods and PVCs, Services, the PodDisruptionBudget, the NetworkPolicy,
// certificate Secrets, backup/verify/delete Jobs and their Pods.
func ownedKinds() []client.Object {
	return []client.Object{
		&corev1.Secret{}, &corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{},
		&policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{}, &batchv1.Job{},
	}
}
