package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

func TestCreateBuildsASecureBootstrap(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, nil)

	operatortest.Eventually(t, "3 member pods", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for _, p := range pods.Items {
		args := strings.Join(p.Spec.Containers[0].Args, " ")
		for _, want := range []string{"--initial-cluster-state=new", "--client-cert-auth=true", "--peer-client-cert-auth=true",
			"--initial-cluster=demo-0=https://demo-0.demo-peer." + ns + ".svc:2380,demo-1=", "--initial-cluster-token=" + ns + "-demo-" + string(c.UID)} {
			if !strings.Contains(args, want) {
				t.Errorf("pod %s args lack %q: %s", p.Name, want, args)
			}
		}
		if p.Spec.Containers[0].Image != "gcr.io/etcd-development/etcd:v3.6.16" {
			t.Errorf("image = %s", p.Spec.Containers[0].Image)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != c.UID {
			t.Errorf("pod %s not owned by the cluster", p.Name)
		}
	}
	for _, name := range []string{"demo-0", "demo-1", "demo-2"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.PersistentVolumeClaim{}); err != nil {
			t.Errorf("PVC %s: %v", name, err)
		}
	}
	for _, name := range []string{"demo-ca", "demo-server-tls", "demo-peer-tls", "demo-client-tls", "demo-operator-tls"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); err != nil {
			t.Errorf("secret %s: %v", name, err)
		}
	}
	peer := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-peer"}, peer); err != nil || !peer.Spec.PublishNotReadyAddresses {
		t.Errorf("peer service: %v %+v", err, peer.Spec)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, pdb); err != nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("pdb: %v %+v", err, pdb.Spec)
	}

	operatortest.Eventually(t, "status records the bootstrap", func() error {
		s := operatortest.Get(t, c).Status
		if len(s.Members) != 3 || s.Phase != etcdv1alpha1.PhaseCreating || s.NextMemberIndex != 3 || s.Endpoints.ClientSecret != "demo-client-tls" ||
			s.Endpoints.ClientServiceName != "demo-client" {
			return fmt.Errorf("status = %+v", s)
		}
		av := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionAvailable)
		if av == nil || av.Status != metav1.ConditionFalse || av.Reason != "Bootstrapping" {
			return fmt.Errorf("Available = %+v", av)
		}
		return nil
	})
	if !slices.Contains(operatortest.Get(t, c).Finalizers, naming.Finalizer) {
		t.Error("no finalizer")
	}
	operatortest.Eventually(t, "an event for the bootstrap", func() error {
		evs := &corev1.EventList{}
		if err := k8s.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "Bootstrapping" && e.InvolvedObject.Name == "demo" {
				return nil
			}
		}
		return fmt.Errorf("%d events, none Bootstrapping", len(evs.Items))
	})
}

func TestPausedClusterIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	pod := &corev1.Pod{}
	operatortest.Eventually(t, "member pod", func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, pod) })

	setPaused := func(paused bool) {
		t.Helper()
		// The operator writes the object too (its finalizer): retry on a conflict.
		operatortest.Eventually(t, fmt.Sprintf("set paused %v", paused), func() error {
			cur := operatortest.Get(t, c)
			cur.Spec.Maintenance.Paused = paused
			return k8s.Update(ctx, cur)
		})
	}
	setPaused(true)
	operatortest.Eventually(t, "Paused is reported", func() error {
		s := operatortest.Get(t, c).Status
		if p := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionProgressing); s.Phase != etcdv1alpha1.PhasePaused || p == nil || p.Reason != "Paused" {
			return fmt.Errorf("phase %s, Progressing %+v", s.Phase, p)
		}
		return nil
	})
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a paused cluster's pod was recreated (err %v)", err)
	}

	setPaused(false)
	operatortest.Eventually(t, "pod recreated after unpause", func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &corev1.Pod{}) })
}

func TestUnsupportedVersionIsRefusedWithACondition(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.1" })
	operatortest.Eventually(t, "Degraded UnsupportedVersion", func() error {
		d := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Reason != "UnsupportedVersion" || !strings.Contains(d.Message, "3.6.16") {
			return fmt.Errorf("Degraded = %+v", d)
		}
		return nil
	})
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	if len(pods.Items) != 0 {
		t.Fatalf("%d pods started for an unsupported version", len(pods.Items))
	}
}

// TestAPassWaitsForTheCacheToShowTheOperatorsLastWrite: after the operator writes the cluster, a
// pass on the cache's older copy looks again instead of deciding on it; the copy the write left, or
// a later one (another writer after the operator), ends the wait. Other writers (the manager's own
// passes) may slip in between, so each round is taken on fresh copies until one ran undisturbed.
func TestAPassWaitsForTheCacheToShowTheOperatorsLastWrite(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.Paused = true })
	r := &EtcdClusterReconciler{Client: k8s, apiReader: k8s}
	mark := func(from *etcdv1alpha1.EtcdCluster, value string) (*etcdv1alpha1.EtcdCluster, error) {
		next := from.DeepCopy()
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, "test.etcd.autopilot.dev/mark", value)
		return next, k8s.Update(ctx, next)
	}
	behind := func(mem *clusterMemory, view *etcdv1alpha1.EtcdCluster, want bool) error {
		got, err := r.cacheBehind(ctx, view, mem)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("cacheBehind on version %s (written %s) = %v, want %v", view.ResourceVersion, mem.ownWrite, got, want)
		}
		return nil
	}

	mem := &clusterMemory{}
	if err := behind(mem, operatortest.Get(t, c), false); err != nil {
		t.Fatalf("nothing written yet: %v", err)
	}
	// ownWrite is the operator's write: the copy before it, the one it left, and the memory of it.
	ownWrite := func(value string) (before, written *etcdv1alpha1.EtcdCluster, mem *clusterMemory, err error) {
		before = operatortest.Get(t, c)
		if written, err = mark(before, value); err != nil {
			return nil, nil, nil, err
		}
		mem = &clusterMemory{}
		mem.rememberOwnWrite(before.ResourceVersion, written.ResourceVersion)
		return before, written, mem, nil
	}
	// The cache shows the copy before the write (behind), then either the written copy or a later
	// one another writer made (not behind either way, and the write is forgotten).
	for _, another := range []bool{false, true} {
		operatortest.Eventually(t, fmt.Sprintf("the older copy waited on, then the newer seen (another writer after ours: %t)", another), func() error {
			before, seen, mem, err := ownWrite(fmt.Sprintf("operator-%t", another))
			if err != nil {
				return err
			}
			if another {
				if seen, err = mark(seen, "someone-else"); err != nil {
					return err
				}
			}
			if err := behind(mem, before, true); err != nil {
				return err
			}
			if err := behind(mem, seen, false); err != nil {
				return err
			}
			if mem.ownWrite != "" {
				return fmt.Errorf("the write is still remembered once the cache showed %s", seen.ResourceVersion)
			}
			return nil
		})
	}
}
