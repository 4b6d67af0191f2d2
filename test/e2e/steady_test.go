//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// apiState is what the operator writes in a namespace: every object's resourceVersion (pods: their
// metadata only, since the kubelet writes pod status) and every event's count.
func apiState(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	add := func(kind string, list client.ObjectList, key func(client.Object) string) {
		if err := env.K8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			out[kind+"/"+obj.GetName()] = key(obj)
			return nil
		})
	}
	rv := func(o client.Object) string { return o.GetResourceVersion() }
	add("EtcdCluster", &etcdv1alpha1.EtcdClusterList{}, rv)
	add("Secret", &corev1.SecretList{}, rv)
	add("Service", &corev1.ServiceList{}, rv)
	add("PVC", &corev1.PersistentVolumeClaimList{}, func(o client.Object) string {
		return fmt.Sprint(o.GetUID(), o.GetLabels(), o.GetAnnotations(), o.(*corev1.PersistentVolumeClaim).Spec.Resources)
	})
	add("PDB", &policyv1.PodDisruptionBudgetList{}, func(o client.Object) string {
		return fmt.Sprint(o.GetUID(), o.GetGeneration(), o.GetLabels(), o.GetAnnotations())
	})
	add("Pod", &corev1.PodList{}, func(o client.Object) string {
		return fmt.Sprint(o.GetUID(), o.GetLabels(), o.GetAnnotations(), o.GetDeletionTimestamp())
	})
	add("Event", &corev1.EventList{}, func(o client.Object) string {
		e := o.(*corev1.Event)
		return fmt.Sprint(e.Count, e.LastTimestamp, e.Series)
	})
	return out
}

// Issue 12 item 10: a healthy cluster under a steady write load costs no API writes: the operator
// observes etcd every 30 s but writes status, objects and events only when something changed.
func TestHealthyClusterUnderWriteLoadCausesNoAPIWrites(t *testing.T) {
	framework.Parallel(t, 115*time.Second)
	c := newCluster(t, "")
	cl := env.EtcdClient(t, c)
	w := framework.StartWriter(cl, "/steady/")
	time.Sleep(15 * time.Second) // let the passes that saw the cluster converge finish
	before := apiState(t, c.Namespace)
	const window = 70 * time.Second // more than two idle passes
	time.Sleep(window)
	after := apiState(t, c.Namespace)
	acked, failed := w.Finish()
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, k)
		}
	}
	if len(changed) > 0 {
		t.Fatalf("%d API objects written in %s of steady load: %s", len(changed), window, strings.Join(changed, ", "))
	}
	if len(acked) < 100 || failed > 0 {
		t.Fatalf("the load was not steady: %d writes acknowledged, %d failed", len(acked), failed)
	}
	t.Logf("%s: %d writes acknowledged, 0 API writes by the operator", window, len(acked))
}

// Issue 12 item 11: a NOSPACE alarm stops writes cluster-wide, but it says nothing against any one
// member: every member stays healthy (none is replaced), the cluster stays Available, and Degraded
// says which alarm is raised and what it means.
func TestNoSpaceAlarmKeepsMembersHealthy(t *testing.T) {
	framework.Parallel(t, 95*time.Second)
	const replaceAfter = 20 * time.Second
	ns := env.NewNamespace(t, "e2e-nospace-")
	env.StartOperator(t, ns, "")
	c := createWith(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Etcd.QuotaBackendBytes = 24 << 20
		c.Spec.Maintenance.ReplaceFailedMemberAfter = replaceAfter.String()
	})
	cl := env.EtcdClient(t, c)
	ids := memberIDs(t, cl)
	value := strings.Repeat("x", 512<<10)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cl.Put(ctx, fmt.Sprintf("/fill/%04d", i), value)
		cancel()
		if err != nil {
			if !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatalf("put %d: %v", i, err)
			}
			break
		}
		if i > 200 {
			t.Fatal("no NOSPACE after 100 MiB with a 24 MiB quota")
		}
	}
	framework.WaitFor(t, "Degraded=AlarmRaised", time.Minute, func() error {
		cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if cond == nil || cond.Reason != "AlarmRaised" || !strings.Contains(cond.Message, "NOSPACE") {
			return fmt.Errorf("degraded = %+v", cond)
		}
		return nil
	})
	time.Sleep(2 * replaceAfter)
	s := env.Get(t, c).Status
	if s.ReadyReplicas != 3 {
		t.Errorf("ready members = %d under NOSPACE, want 3: %+v", s.ReadyReplicas, s.Members)
	}
	if av := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionAvailable); av == nil || av.Status != metav1.ConditionTrue {
		t.Errorf("available = %+v under NOSPACE", av)
	}
	if got := memberIDs(t, cl); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("members replaced under NOSPACE: %x -> %x", ids, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Get(ctx, "/fill/0000"); err != nil {
		t.Fatalf("reads fail under NOSPACE: %v", err)
	}
}
