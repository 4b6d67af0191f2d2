//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func setVersion(t *testing.T, c *v1.EtcdCluster, version string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"version":%q}}`, version))
	if err := k8s.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// 3 members 3.5 → 3.7 under a continuous writer: the operator steps through 3.6 itself, one member at
// a time, and no acknowledged write is lost; every member ends with the same data (HashKV).
func TestUpgrade35To37UnderWrites(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, "")
	c := &v1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	c.Spec.Replicas, c.Spec.Version = 3, "3.5.35"
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, c, 3, convergeTimeout)
	cl := etcdClient(t, c)
	w := startWriter(cl, "/upgrade/")

	seen36 := false
	setVersion(t, c, "3.7.3")
	waitFor(t, "every member at 3.7.3", 10*time.Minute, func() error {
		s := getCluster(t, c).Status
		if s.CurrentVersion == "3.6.16" {
			seen36 = true
		}
		if u := meta.FindStatusCondition(s.Conditions, v1.ConditionUpgrading); u != nil && u.Status == metav1.ConditionTrue {
			t.Logf("Upgrading: %s", u.Message)
		}
		if s.CurrentVersion != "3.7.3" {
			return fmt.Errorf("current version %s", s.CurrentVersion)
		}
		for _, m := range s.Members {
			if m.Version != "3.7.3" || !m.Healthy {
				return fmt.Errorf("member %s at %s healthy=%v", m.Name, m.Version, m.Healthy)
			}
		}
		return nil
	})
	waitConverged(t, c, 3, convergeTimeout)
	refreshEndpoints(t, cl, c)
	time.Sleep(2 * time.Second)
	acked, failed := w.finish()
	t.Logf("writer: %d acknowledged, %d failed during 3.5.35 → 3.7.3", len(acked), failed)
	if !seen36 {
		t.Error("the cluster never reported 3.6.16: it did not step through 3.6")
	}
	checkKeys(t, cl, "/upgrade/", acked)

	// Same data everywhere.
	var hashes []string
	for _, ep := range podEndpoints(t, c) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := clientv3.NewMaintenance(cl).HashKV(ctx, ep, 0)
		cancel()
		if err != nil {
			t.Fatalf("HashKV %s: %v", ep, err)
		}
		hashes = append(hashes, fmt.Sprintf("%d@%d", resp.Hash, resp.Header.Revision))
	}
	for _, h := range hashes[1:] {
		if strings.Split(h, "@")[0] != strings.Split(hashes[0], "@")[0] {
			t.Fatalf("members disagree on their data: %v", hashes)
		}
	}
}

// A downgrade across a minor needs etcd's downgrade API; the operator refuses it with the reason and
// leaves the cluster as it is.
func TestCrossMinorDowngradeIsRefused(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, "")
	c := createCluster(t, ns, 1)
	waitConverged(t, c, 1, convergeTimeout)
	uids := memberPodUIDs(t, c)
	setVersion(t, c, "3.5.35")
	waitFor(t, "refusal reported", time.Minute, func() error {
		u := meta.FindStatusCondition(getCluster(t, c).Status.Conditions, v1.ConditionUpgrading)
		if u == nil || u.Reason != "VersionChangeRefused" || !strings.Contains(u.Message, "downgrade") {
			return fmt.Errorf("Upgrading = %+v", u)
		}
		return nil
	})
	for name, uid := range memberPodUIDs(t, c) {
		if uids[name] != uid {
			t.Fatalf("pod %s was restarted by a refused downgrade", name)
		}
	}
}
