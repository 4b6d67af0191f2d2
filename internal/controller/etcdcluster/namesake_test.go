package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A certificate Secret, the client Service and the NetworkPolicy of a cluster's names, made by
// someone else before the cluster, meet the one rule of ownedObject: each is refused and reported
// (Degraded NameConflict naming it, a Warning event), never labelled, corrected or taken over. Once
// the user removes each, the next is met, and then the cluster makes its own.
func TestForeignNamesakeObjectsAreRefusedAndReported(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	mine := map[string]string{"app": "mine"}
	foreign := []client.Object{ // in the order a pass meets them: certificates, Services, NetworkPolicy
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.ServerSecret("demo"), Labels: mine},
			Data: map[string][]byte{"token": []byte("not a certificate")}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.ClientService("demo"), Labels: mine},
			Spec: corev1.ServiceSpec{Selector: mine, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.NetworkPolicy("demo"), Labels: mine},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: mine}}},
	}
	for _, obj := range foreign {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	for _, obj := range foreign {
		kind := fmt.Sprintf("%T", obj)[len("*v1."):]
		operatortest.Eventually(t, "NameConflict naming "+kind+" "+obj.GetName(), func() error {
			if err := degradedReason(t, c, string(reason.NameConflict)); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
			if want := kind + " " + obj.GetName() + " already exists"; !strings.Contains(cond.Message, want) {
				return fmt.Errorf("message %q does not say %q", cond.Message, want)
			}
			return nil
		})
		waitWarningEvent(t, ns, c.Name, reason.NameConflict, kind+" "+obj.GetName())
		live := obj.DeepCopyObject().(client.Object)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			t.Fatal(err)
		}
		if live.GetResourceVersion() != obj.GetResourceVersion() || len(live.GetOwnerReferences()) != 0 {
			t.Fatalf("%s %s was changed: resourceVersion %s, was %s; owners %v", kind, obj.GetName(), live.GetResourceVersion(), obj.GetResourceVersion(), live.GetOwnerReferences())
		}
		if err := k8s.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	operatortest.Eventually(t, "the cluster's own objects made", func() error {
		for _, obj := range foreign {
			live := obj.DeepCopyObject().(client.Object)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != c.UID {
				return fmt.Errorf("%s controlled by %+v", obj.GetName(), ref)
			}
		}
		return nil
	})
}
