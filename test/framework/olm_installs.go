package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// The package, its ClusterExtension (docs/olmv1) and CRDs, as the OLM suites install them.
const (
	olmPackage   = "etcd-autopilot"
	olmExtension = "etcd-autopilot"
)

// CRDNames are the operator's CRDs.
var CRDNames = []string{"etcdclusters.etcd.autopilot.dev", "etcdbackups.etcd.autopilot.dev", "etcdbackupschedules.etcd.autopilot.dev"}

func listOf(apiVersion, kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind)
	return l
}

// RemoveEtcdAutopilot leaves the cluster without etcd-autopilot: OLM v1 refuses to take over CRDs
// and ClusterRoles another installer made (the e2e suite's kubectl apply, OLM v0's CSVs, which
// leave their ClusterRoles behind), and a ClusterExtension of an earlier run owns them otherwise.
// Objects of the CRDs lose their finalizers first: no operator is left to release them.
func (e *Env) RemoveEtcdAutopilot(ctx context.Context) error {
	ext := &unstructured.Unstructured{}
	ext.SetAPIVersion("olm.operatorframework.io/v1")
	ext.SetKind("ClusterExtension")
	ext.SetName(olmExtension)
	if err := e.K8s.Delete(ctx, ext); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return fmt.Errorf("delete ClusterExtension: %w", err)
	}
	release := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
	for _, kind := range []string{"EtcdClusterList", "EtcdBackupList", "EtcdBackupScheduleList"} {
		l := listOf(etcdv1alpha1.GroupVersion.String(), kind)
		if err := e.K8s.List(ctx, l); err != nil {
			continue // no CRD
		}
		for i := range l.Items {
			_ = e.K8s.Patch(ctx, &l.Items[i], release)
		}
	}
	for _, name := range CRDNames {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := e.K8s.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete CRD %s: %w", name, err)
		}
	}
	// OLM v0 labels what a CSV made with olm.owner=<csv name>.
	for _, kind := range []string{"ClusterRoleList", "ClusterRoleBindingList"} {
		l := listOf(rbacv1.SchemeGroupVersion.String(), kind)
		if err := e.K8s.List(ctx, l, client.HasLabels{"olm.owner"}); err != nil {
			return err
		}
		for i := range l.Items {
			if strings.HasPrefix(l.Items[i].GetLabels()["olm.owner"], olmPackage+".v") {
				if err := e.K8s.Delete(ctx, &l.Items[i]); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left := []string{}
		if err := e.K8s.Get(ctx, client.ObjectKeyFromObject(ext), ext.DeepCopy()); err == nil {
			left = append(left, "ClusterExtension "+olmExtension)
		}
		for _, name := range CRDNames {
			if err := e.K8s.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err == nil {
				left = append(left, "CRD "+name)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still present after 2m: %v", left)
		}
		time.Sleep(time.Second)
	}
}

// ServeCatalog applies CatalogSource ns/name serving the catalog image (by digest: OLM pulls tag
// references) as fieldOwner, and waits until OLM reports its registry pod READY. Applying it again
// with another image publishes that catalog: OLM replaces the registry pod and resolves
// Subscriptions against the new content.
func (e *Env) ServeCatalog(ctx context.Context, ns, name, image, fieldOwner string) error {
	cs := &unstructured.Unstructured{}
	cs.SetAPIVersion("operators.coreos.com/v1alpha1")
	cs.SetKind("CatalogSource")
	cs.SetNamespace(ns)
	cs.SetName(name)
	cs.Object["spec"] = map[string]any{
		"sourceType":    "grpc",
		"image":         image,
		"displayName":   "etcd-autopilot (" + fieldOwner + ")",
		"publisher":     "etcd-autopilot",
		"grpcPodConfig": map[string]any{"securityContextConfig": "restricted"},
	}
	if err := e.K8s.Patch(ctx, cs, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply CatalogSource: %w", err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if err := e.K8s.Get(ctx, client.ObjectKeyFromObject(cs), cs); err == nil {
			if s, _, _ := unstructured.NestedString(cs.Object, "status", "connectionState", "lastObservedState"); s == "READY" {
				return nil
			}
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Errorf("CatalogSource %s/%s not READY after 3m: %v", ns, name, cs.Object["status"])
}

// ConditionTrue tells whether an OLM object's status condition typ is True.
func ConditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}
