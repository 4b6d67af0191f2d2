//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// previousRelease is the commit of the operator's previous release (v0.1.0), built from this
// repository's history; E2E_PREVIOUS_RELEASE overrides it.
const previousRelease = "c48036b48419ac8a5e830c953d53639379acdc4e"

// restartCounts maps member pods to their etcd container's restart count.
func restartCounts(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]int32 {
	t.Helper()
	pods := env.MemberPods(t, c)
	out := map[string]int32{}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name] += cs.RestartCount
		}
	}
	return out
}

// The previous release creates a cluster; the current operator replaces it and adopts the cluster
// without restarting any etcd pod. A later spec change that needs new pods is rolled one member at
// a time under a writer, with nothing lost.
func TestOperatorUpgradeAdoptsWithoutRestarts(t *testing.T) {
	framework.Parallel(t, 65*time.Second)
	commit := previousRelease
	if v := os.Getenv("E2E_PREVIOUS_RELEASE"); v != "" {
		commit = v
	}
	oldBin, err := env.BuildManagerAt("../..", commit)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.NewNamespace(t, "e2e-")
	old := env.StartOperatorBinary(t, oldBin, ns)
	// Created under this tree's CRD, as a previous operator running beside it meets it (CRDs are
	// cluster-wide): the CRD fills in the defaults that operator reads.
	c := env.CreateCluster(t, ns, 3, "3.6.16")
	env.WaitConverged(t, c, 3, convergeTimeout)
	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/adopt/", 1000)
	uids, restarts := env.MemberPodUIDs(t, c), restartCounts(t, c)
	old.Stop()

	env.StartOperator(t, ns, "")
	framework.WaitFor(t, "every pod adopted", 2*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := env.K8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Annotations[naming.AnnotationConfigHash] == "" {
				return fmt.Errorf("pod %s not adopted yet", p.Name)
			}
		}
		return nil
	})
	env.WaitConverged(t, c, 3, convergeTimeout)
	// Give a wrongly eager operator time to restart something before looking.
	time.Sleep(10 * time.Second)
	for name, uid := range env.MemberPodUIDs(t, c) {
		if uids[name] != uid {
			t.Errorf("pod %s was replaced by the operator upgrade", name)
		}
	}
	for name, n := range restartCounts(t, c) {
		if n != restarts[name] {
			t.Errorf("etcd in pod %s restarted %d times after the operator upgrade", name, n-restarts[name])
		}
	}
	framework.CheckKeys(t, cl, "/adopt/", keys)

	// A spec change that needs new pods: rolled one member at a time, nothing lost.
	w := framework.StartWriter(cl, "/adopt-roll/")
	stop := followPods(cl, c)
	current := env.Get(t, c)
	current.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	if err := env.K8s.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "every pod rebuilt with the new resources", 5*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := env.K8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
			return err
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Resources.Requests.Memory().String() != "64Mi" {
				return fmt.Errorf("pod %s not rebuilt yet", p.Name)
			}
		}
		return nil
	})
	env.WaitConverged(t, c, 3, convergeTimeout)
	acked, failed := env.StopWriter(t, w, stop, cl, c)
	t.Logf("rolling reconfiguration: writer %d acknowledged, %d failed attempts", len(acked), failed)
	framework.CheckWrites(t, cl, w)
	framework.CheckKeys(t, cl, "/adopt/", keys)
}
