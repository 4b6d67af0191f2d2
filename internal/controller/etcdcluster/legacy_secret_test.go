package etcdcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A cluster made by an operator up to 0.2.0 has its operator certificate in
// <name>-operator-client-tls: the operator issues <name>-operator-tls from the same CA and deletes
// the old Secret once no unfinished backup Job mounts it. A Secret of that name that the cluster
// does not control (cluster <name>-operator's user certificate) is never touched.
func TestLegacyOperatorSecretIsRetiredOnlyWhenOwned(t *testing.T) {
	ctx := context.Background()

	// An upgraded cluster: its legacy Secret, and a backup Job still mounting it.
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Name = "m" })
	// Labelled as the operator labels what it makes (resources.Secret, snapshotJob): its cache sees
	// nothing else.
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: naming.LegacyOperatorClientSecret("m"), Namespace: ns, Labels: naming.Labels("m"),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))}}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "etcdbackup-old", Namespace: ns, Labels: naming.Labels("m")},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "backup", Image: "example.test/x"}},
			Volumes:       []corev1.Volume{{Name: "client-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: legacy.Name}}}},
		}}},
	}
	for _, o := range []client.Object{legacy, job} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	operatortest.Eventually(t, "the new operator Secret is issued", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.OperatorClientSecret("m")}, &corev1.Secret{})
	})
	time.Sleep(2 * time.Second) // a few passes
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(legacy), &corev1.Secret{}); err != nil {
		t.Fatalf("the legacy Secret went while a Job mounts it: %v", err)
	}
	if err := k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "the legacy Secret is deleted", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(legacy), &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})

	// Clusters m and m-operator side by side: m's legacy name is m-operator's user Secret.
	ns2 := operatortest.NewNamespace(t)
	other := operatortest.NewCluster(t, ns2, func(c *etcdv1alpha1.EtcdCluster) { c.Name = "m-operator" })
	user := &corev1.Secret{}
	operatortest.Eventually(t, "m-operator's user Secret", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns2, Name: naming.UserClientSecret("m-operator")}, user)
	})
	operatortest.NewCluster(t, ns2, func(c *etcdv1alpha1.EtcdCluster) { c.Name = "m" })
	operatortest.Eventually(t, "m's operator Secret", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns2, Name: naming.OperatorClientSecret("m")}, &corev1.Secret{})
	})
	time.Sleep(2 * time.Second)
	after := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(user), after); err != nil {
		t.Fatalf("m-operator's user Secret: %v", err)
	}
	if after.UID != user.UID || !metav1.IsControlledBy(after, other) || string(after.Data["tls.crt"]) != string(user.Data["tls.crt"]) {
		t.Errorf("cluster m replaced or rewrote m-operator's user Secret")
	}
}
