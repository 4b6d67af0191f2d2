package framework

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// What the OLM suites (test/olm, test/olmv1) check around an install: the operator Deployment,
// its rights, and the clusters it must leave alone or keep serving.

// Availability samples a cluster's Available condition every second until Finish.
type Availability struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	lost []string
}

// WatchAvailable starts sampling c's Available condition.
func (e *Env) WatchAvailable(c *etcdv1alpha1.EtcdCluster) *Availability {
	a := &Availability{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-tick.C:
			}
			cur := &etcdv1alpha1.EtcdCluster{}
			if err := e.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil {
				continue
			}
			if cond := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable); cond == nil || cond.Status != metav1.ConditionTrue {
				a.mu.Lock()
				a.lost = append(a.lost, fmt.Sprintf("%s: %v", time.Now().Format(time.TimeOnly), cond))
				a.mu.Unlock()
			}
		}
	}()
	return a
}

// Finish stops sampling and returns every sample in which the cluster was not Available.
func (a *Availability) Finish() []string {
	close(a.stop)
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

// SetPaused sets spec.maintenance.paused and waits until the operator has observed that
// generation (and, when pausing, reports the Paused phase).
func (e *Env) SetPaused(t *testing.T, c *etcdv1alpha1.EtcdCluster, paused bool, timeout time.Duration) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"maintenance":{"paused":%v}}}`, paused))
	if err := e.K8s.Patch(context.Background(), e.Get(t, c), client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, fmt.Sprintf("paused=%v observed", paused), timeout, func() error {
		got := e.Get(t, c)
		if got.Status.ObservedGeneration != got.Generation || paused != (got.Status.Phase == etcdv1alpha1.PhasePaused) {
			return fmt.Errorf("observed generation %d of %d, phase %s", got.Status.ObservedGeneration, got.Generation, got.Status.Phase)
		}
		return nil
	})
}

// Untouched fails unless no operator has acted on c: no status, no finalizer, no member pods.
func (e *Env) Untouched(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	got := e.Get(t, c)
	pods := &corev1.PodList{}
	if err := e.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != "" || len(got.Finalizers) > 0 || len(pods.Items) > 0 {
		t.Fatalf("EtcdCluster %s/%s outside the target namespaces was reconciled: phase=%q finalizers=%v pods=%d",
			c.Namespace, c.Name, got.Status.Phase, got.Finalizers, len(pods.Items))
	}
}

// ServiceAccountCan asks the API server whether ServiceAccount ns/name may do attrs.
func (e *Env) ServiceAccountCan(t *testing.T, ns, name string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + name,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
		ResourceAttributes: &attrs,
	}}
	if err := e.K8s.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// DeploymentImage is the image of the first container of Deployment ns/name.
func (e *Env) DeploymentImage(t *testing.T, ns, name string) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := e.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// WaitDeploymentReady waits until Deployment ns/name (one replica) has rolled out completely.
func (e *Env) WaitDeploymentReady(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	WaitFor(t, "Deployment "+ns+"/"+name+" rolled out", timeout, func() error {
		d := &appsv1.Deployment{}
		if err := e.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 1 || d.Status.AvailableReplicas != 1 || d.Status.Replicas != 1 {
			return fmt.Errorf("updated=%d available=%d replicas=%d", d.Status.UpdatedReplicas, d.Status.AvailableReplicas, d.Status.Replicas)
		}
		return nil
	})
}
