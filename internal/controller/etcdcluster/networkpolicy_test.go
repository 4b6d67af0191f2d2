package etcdcluster

import (
	"context"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// The members' NetworkPolicy is there by default, owned and labelled, put back when edited (even
// with its labels removed, which hides it from the operator's cache), gone when opted out and back
// when opted in again.
func TestNetworkPolicyIsKeptAndOptedOut(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, nil)
	key := client.ObjectKey{Namespace: ns, Name: naming.NetworkPolicy(c.Name)}
	asBuilt := func() error {
		np := &networkingv1.NetworkPolicy{}
		if err := k8s.Get(ctx, key, np); err != nil {
			return err
		}
		want := resources.NetworkPolicy(operatortest.Get(t, c), operatortest.OperatorNamespace)
		if !equality.Semantic.DeepEqual(np.Spec, want.Spec) || np.Labels[naming.LabelManagedBy] != naming.ManagedBy {
			return fmt.Errorf("policy = %+v %v, want the builder's", np.Spec, np.Labels)
		}
		if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != c.UID {
			return fmt.Errorf("controller = %+v", ref)
		}
		return nil
	}
	operatortest.Eventually(t, "the default policy", asBuilt)

	np := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(ctx, key, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} // opens every port to everyone
	if err := k8s.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "an edited policy put back", asBuilt)

	if err := k8s.Get(ctx, key, np); err != nil {
		t.Fatal(err)
	}
	np.Labels = nil
	np.Spec.Ingress = nil
	if err := k8s.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "an unlabelled, emptied policy put back", asBuilt)

	setEnabled := func(on bool) {
		// A patch, not an update: the operator's status writes change the object's resourceVersion.
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"networkPolicy":{"enabled":%t}}}`, on))
		if err := k8s.Patch(ctx, operatortest.Get(t, c), patch); err != nil {
			t.Fatal(err)
		}
	}
	setEnabled(false)
	operatortest.Eventually(t, "the policy deleted on opt-out", func() error {
		if err := k8s.Get(ctx, key, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	setEnabled(true)
	operatortest.Eventually(t, "the policy back on opt-in", asBuilt)

	// A namesake the cluster does not control is neither taken over nor deleted on opt-out.
	other := operatortest.NewCluster(t, operatortest.NewNamespace(t), func(c *etcdv1alpha1.EtcdCluster) { c.Spec.NetworkPolicy.Enabled = ptr.To(false) })
	foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: other.Name, Namespace: other.Namespace}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "the opted-out cluster reconciled", func() error {
		if len(operatortest.Get(t, other).Status.Members) == 0 {
			return fmt.Errorf("no members yet")
		}
		return nil
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), &networkingv1.NetworkPolicy{}); err != nil {
		t.Fatalf("the user's own NetworkPolicy: %v", err)
	}
}
