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
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

func setVersion(t *testing.T, c *v1.EtcdCluster, version string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"version":%q}}`, version))
	if err := env.K8s.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// waitAllAt waits until every member reports version and is healthy.
func waitAllAt(t *testing.T, c *v1.EtcdCluster, version string, timeout time.Duration) {
	t.Helper()
	framework.WaitFor(t, "every member at "+version, timeout, func() error {
		s := env.Get(t, c).Status
		if s.CurrentVersion != version {
			return fmt.Errorf("current version %s", s.CurrentVersion)
		}
		for _, m := range s.Members {
			if m.Version != version || !m.Healthy {
				return fmt.Errorf("member %s at %s healthy=%v", m.Name, m.Version, m.Healthy)
			}
		}
		return nil
	})
}

// sameDataEverywhere compares HashKV of every member at the same revision.
func sameDataEverywhere(t *testing.T, cl *clientv3.Client, c *v1.EtcdCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	head, err := cl.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	rev := head.Header.Revision
	var hashes []uint32
	for _, ep := range env.PodEndpoints(t, c) {
		resp, err := clientv3.NewMaintenance(cl).HashKV(ctx, ep, rev)
		if err != nil {
			t.Fatalf("HashKV %s: %v", ep, err)
		}
		hashes = append(hashes, resp.Hash)
	}
	for _, h := range hashes[1:] {
		if h != hashes[0] {
			t.Fatalf("members disagree on their data at revision %d: %v", rev, hashes)
		}
	}
}

// 3.6 → 3.7 under a continuous writer: one member at a time, followers first, leader last; no
// acknowledged write lost; every member ends with the same data.
func TestUpgrade36To37UnderWrites(t *testing.T) {
	ns := env.NewNamespace(t, "e2e-")
	env.StartOperator(t, ns, "")
	c := env.CreateCluster(t, ns, 3, "3.6.16")
	env.WaitConverged(t, c, 3, convergeTimeout)
	cl := env.EtcdClient(t, c)
	w := framework.StartWriter(cl, "/upgrade/")
	uids := env.MemberPodUIDs(t, c)

	setVersion(t, c, "3.7.3")
	waitAllAt(t, c, "3.7.3", 5*time.Minute)
	env.WaitConverged(t, c, 3, convergeTimeout)
	env.RefreshEndpoints(t, cl, c)
	time.Sleep(2 * time.Second)
	acked, failed := w.Finish()
	t.Logf("writer: %d acknowledged, %d failed during 3.6.16 → 3.7.3", len(acked), failed)
	framework.CheckKeys(t, cl, "/upgrade/", acked)
	sameDataEverywhere(t, cl, c)
	for name, uid := range env.MemberPodUIDs(t, c) {
		if uids[name] == uid {
			t.Errorf("pod %s was not restarted by the upgrade", name)
		}
	}
}

// 3.5 → 3.7: the operator steps through 3.6 itself. etcd 3.7 may be unable to replay raft entries a
// cluster wrote while it ran 3.5 (seen here: 3.7.3 panics at apply, on some runs) until every member
// has taken a snapshot on 3.6. Either the 3.7 step succeeds, or the operator notices, rolls that
// member back to 3.6, stops and says so; in both cases nothing is lost.
func TestUpgrade35To37StepsThrough36(t *testing.T) {
	ns := env.NewNamespace(t, "e2e-")
	env.StartOperator(t, ns, "")
	c := env.CreateCluster(t, ns, 3, "3.5.35")
	env.WaitConverged(t, c, 3, convergeTimeout)
	cl := env.EtcdClient(t, c)
	w := framework.StartWriter(cl, "/upgrade/")

	setVersion(t, c, "3.7.3")
	// The cluster version (the lowest member version) must pass through 3.6.16, whatever happens next.
	seen36 := false
	framework.WaitFor(t, "the upgrade ends", 10*time.Minute, func() error {
		s := env.Get(t, c).Status
		if s.CurrentVersion == "3.6.16" {
			seen36 = true
		}
		if s.UpgradeBlocked != nil {
			return nil
		}
		for _, m := range s.Members {
			if m.Version != "3.7.3" || !m.Healthy {
				return fmt.Errorf("upgrading: current %s, member %s at %s healthy=%v", s.CurrentVersion, m.Name, m.Version, m.Healthy)
			}
		}
		return nil
	})
	if !seen36 {
		t.Fatal("the cluster never ran 3.6.16: the operator did not step through 3.6")
	}
	if b := env.Get(t, c).Status.UpgradeBlocked; b != nil {
		// Only the member that failed goes back; members already on 3.7 stay (etcd runs mixed
		// versions at the lower cluster version). Wait for the rollback to finish.
		framework.WaitFor(t, "rollback of "+b.Member, 3*time.Minute, func() error {
			s := env.Get(t, c).Status
			for _, m := range s.Members {
				if !m.Healthy || (m.Name == b.Member && m.Version != "3.6.16") {
					return fmt.Errorf("member %s at %s healthy=%v", m.Name, m.Version, m.Healthy)
				}
			}
			if s.CurrentVersion != "3.6.16" {
				return fmt.Errorf("current version %s", s.CurrentVersion)
			}
			return nil
		})
	}
	s := env.Get(t, c).Status
	if s.CurrentVersion != "3.7.3" {
		d := meta.FindStatusCondition(s.Conditions, v1.ConditionDegraded)
		u := meta.FindStatusCondition(s.Conditions, v1.ConditionUpgrading)
		if d == nil || d.Reason != "UpgradeFailed" || u == nil || u.Reason != "UpgradeFailed" || s.UpgradeBlocked.Version != "3.7.3" {
			t.Fatalf("failed step not reported: Degraded %+v, Upgrading %+v, blocked %+v", d, u, s.UpgradeBlocked)
		}
		t.Logf("3.7 step failed and was rolled back: %s", u.Message)
	} else {
		t.Log("the 3.7 step succeeded: every member runs 3.7.3")
	}
	env.RefreshEndpoints(t, cl, c)
	time.Sleep(2 * time.Second)
	acked, failed := w.Finish()
	t.Logf("writer: %d acknowledged, %d failed during 3.5.35 → 3.6.16 → (3.7.3)", len(acked), failed)
	framework.CheckKeys(t, cl, "/upgrade/", acked)
	sameDataEverywhere(t, cl, c)
}

// A downgrade across a minor needs etcd's downgrade API; the operator refuses it with the reason and
// leaves the cluster as it is.
func TestCrossMinorDowngradeIsRefused(t *testing.T) {
	ns := env.NewNamespace(t, "e2e-")
	env.StartOperator(t, ns, "")
	c := env.CreateCluster(t, ns, 1, "")
	env.WaitConverged(t, c, 1, convergeTimeout)
	uids := env.MemberPodUIDs(t, c)
	setVersion(t, c, "3.5.35")
	framework.WaitFor(t, "refusal reported", time.Minute, func() error {
		u := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, v1.ConditionUpgrading)
		if u == nil || u.Reason != "VersionChangeRefused" || !strings.Contains(u.Message, "downgrade") {
			return fmt.Errorf("Upgrading = %+v", u)
		}
		return nil
	})
	for name, uid := range env.MemberPodUIDs(t, c) {
		if uids[name] != uid {
			t.Fatalf("pod %s was restarted by a refused downgrade", name)
		}
	}
}
