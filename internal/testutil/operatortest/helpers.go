package operatortest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// Eventually retries f every 200 ms until it returns nil, and fails the test with what and f's
// last error after 30 s.
func Eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// NewNamespace creates a namespace of its own for a test.
func NewNamespace(t *testing.T) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// NewCluster creates the 3-member EtcdCluster "demo" in ns, as mutate changes it (nil: as is).
func NewCluster(t *testing.T, ns string, mutate func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	c.Spec.Replicas = 3
	c.Spec.Storage.Size = resource.MustParse("1Gi")
	if mutate != nil {
		mutate(c)
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// Every cluster of the package's tests stays (envtest deletes no namespace) and, without etcd,
	// its reconciles wait on dial timeouts: paused once its test is over, it no longer takes the
	// operator's workers from the tests that follow.
	t.Cleanup(func() { pauseAfterTest(c) })
	return c
}

// pauseAfterTest sets spec.maintenance.paused on c, retrying conflicts with the operator's writes for
// a few seconds; a cluster the test deleted is left alone.
func pauseAfterTest(c *etcdv1alpha1.EtcdCluster) {
	for range 20 {
		cur := &etcdv1alpha1.EtcdCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil || cur.DeletionTimestamp != nil || cur.Spec.Maintenance.Paused {
			return
		}
		cur.Spec.Maintenance.Paused = true
		if err := k8s.Update(context.Background(), cur); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Get reads c as the API server has it now.
func Get(t *testing.T, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	out := &etcdv1alpha1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), out); err != nil {
		t.Fatal(err)
	}
	return out
}
