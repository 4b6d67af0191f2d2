//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

func setVersion(t *testing.T, c *etcdv1alpha1.EtcdCluster, version string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"version":%q}}`, version))
	if err := env.K8s.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// waitAllAt waits until every member reports version and is healthy; during, when set, looks at
// every status seen on the way.
func waitAllAt(t *testing.T, c *etcdv1alpha1.EtcdCluster, version string, timeout time.Duration, during func(etcdv1alpha1.EtcdClusterStatus)) {
	t.Helper()
	framework.WaitFor(t, "every member at "+version, timeout, func() error {
		s := env.Get(t, c).Status
		if during != nil {
			during(s)
		}
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
func sameDataEverywhere(t *testing.T, cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	sameDataAt(t, cl, env.PodEndpoints(t, c))
}

// sameDataAt compares HashKV of the members at endpoints at the current revision, and returns the
// hashes.
func sameDataAt(t *testing.T, cl *clientv3.Client, endpoints []string) []uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	head, err := cl.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	rev := head.Header.Revision
	var hashes []uint32
	for _, ep := range endpoints {
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
	return hashes
}

// 3.6 → 3.7 under a continuous writer: one member at a time, followers first, leader last; no
// acknowledged write lost, writes acknowledged throughout; every member ends with the same data.
func TestUpgrade36To37UnderWrites(t *testing.T) {
	framework.Parallel(t, 45*time.Second)
	c := newCluster(t, "3.6.16")
	cl := env.EtcdClient(t, c)
	stop := followPods(cl, c)
	w := framework.StartWriter(cl, "/upgrade/")
	uids := env.MemberPodUIDs(t, c)
	leader := leaderName(t, cl)
	restarts := watchRestarts(c, uids)

	w.FaultBegins()
	setVersion(t, c, "3.7.3")
	waitAllAt(t, c, "3.7.3", 5*time.Minute, nil)
	env.WaitConverged(t, c, 3, convergeTimeout)
	acked, failed := env.StopWriter(t, w, stop, cl, c)
	order := restarts()
	t.Logf("writer: %d acknowledged, %d failed during 3.6.16 → 3.7.3; members restarted in the order %v, %s the leader before", len(acked), failed, order, leader)
	framework.CheckWrites(t, cl, w)
	sameDataEverywhere(t, cl, c)
	for name, uid := range env.MemberPodUIDs(t, c) {
		if uids[name] == uid {
			t.Errorf("pod %s was not restarted by the upgrade", name)
		}
	}
	if len(order) != len(uids) || order[len(order)-1] != leader {
		t.Errorf("members restarted in the order %v; want both followers first and the leader %s last", order, leader)
	}
}

// leaderName is the name of the member etcd reports as its leader.
func leaderName(t *testing.T, cl *clientv3.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	members, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	for _, ep := range cl.Endpoints() {
		st, err := cl.Status(ctx, ep)
		if err != nil || st.Leader == 0 {
			continue
		}
		for _, m := range members.Members {
			if m.ID == st.Leader {
				return m.Name
			}
		}
	}
	t.Fatalf("no member of %v names a leader among %v", cl.Endpoints(), members.Members)
	return ""
}

// watchRestarts records, every 250 ms, the order in which the member pods of c are replaced (a pod
// of the same name with a UID other than the one in uids); the returned func stops it and gives the
// order. A restart waits for the previous member to be Ready again, far longer than a poll.
func watchRestarts(c *etcdv1alpha1.EtcdCluster, uids map[string]string) func() []string {
	var mu sync.Mutex
	var order []string
	stop := framework.Every(250*time.Millisecond, func() {
		pods := &corev1.PodList{}
		if err := env.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
			return // a missed poll: the next one sees the same replacement
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range pods.Items {
			if old, ok := uids[p.Name]; ok && old != string(p.UID) && !slices.Contains(order, p.Name) {
				order = append(order, p.Name)
			}
		}
	})
	return func() []string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), order...)
	}
}

// requireEvent fails unless an event of c says something containing text.
func requireEvent(t *testing.T, c *etcdv1alpha1.EtcdCluster, text string) {
	t.Helper()
	evs := &corev1.EventList{}
	if err := env.K8s.List(context.Background(), evs, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == c.Name && strings.Contains(e.Message, text) {
			t.Logf("event %s: %s", e.Reason, e.Message)
			return
		}
	}
	t.Errorf("no event of %s says %q", c.Name, text)
}

// raftTerm is the highest raft term any member reports: it grows by one per leader election.
func raftTerm(t *testing.T, cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var term uint64
	for _, ep := range env.PodEndpoints(t, c) {
		if st, err := cl.Status(ctx, ep); err == nil {
			term = max(term, st.RaftTerm)
		}
	}
	return term
}

// followPods keeps cl pointed at the member pods of c while they are replaced.
func followPods(cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster) (stop func()) {
	return framework.FollowPods(cl, func() ([]string, error) { return env.CurrentEndpoints(c) })
}

// versionChangeUnderWrites moves the converged 3-member cluster c from its version to another under a
// writer that retries failed puts, and checks what the issue asks of every version change: every
// member at the target, no acknowledged write lost, at most one leader election per member restart,
// and the same data on every member (HashKV). It works in any namespace an operator watches (the
// emulated restricted-v2 SCC's too) and returns c.
func versionChangeUnderWrites(t *testing.T, c *etcdv1alpha1.EtcdCluster, to string, restarts int, during func(s etcdv1alpha1.EtcdClusterStatus)) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	from := env.Get(t, c).Spec.Version
	cl := env.EtcdClient(t, c)
	stop := followPods(cl, c)
	w := framework.StartWriter(cl, "/versions/")
	termBefore := raftTerm(t, cl, c)
	uids := env.MemberPodUIDs(t, c)

	w.FaultBegins()
	setVersion(t, c, to)
	waitAllAt(t, c, to, max(10*time.Minute, time.Duration(restarts)*restartBudget), func(s etcdv1alpha1.EtcdClusterStatus) {
		if during != nil {
			during(s)
		}
		if s.UpgradeBlocked != nil {
			t.Fatalf("the version change failed: %+v", s.UpgradeBlocked)
		}
	})
	env.WaitConverged(t, c, 3, convergeTimeout)
	acked, failed := env.StopWriter(t, w, stop, cl, c)
	elections := raftTerm(t, cl, c) - termBefore
	t.Logf("%s → %s: writer %d acknowledged, %d failed attempts (each retried until acknowledged); %d leader elections for %d member restarts",
		from, to, len(acked), failed, elections, restarts)
	framework.CheckWrites(t, cl, w)
	sameDataEverywhere(t, cl, c)
	if elections > uint64(restarts) {
		t.Errorf("%d leader elections for %d member restarts", elections, restarts)
	}
	for name, uid := range env.MemberPodUIDs(t, c) {
		if uids[name] == uid {
			t.Errorf("pod %s was not restarted", name)
		}
	}
	return c
}

// 3.5 → 3.7: the operator steps through 3.6 itself, then makes every member snapshot past the
// entries etcd 3.5 wrote (etcd 3.7 cannot replay them) before the first 3.7 restart.
func TestUpgrade35To37StepsThrough36(t *testing.T) {
	framework.Parallel(t, 145*time.Second)
	seen36, sawBarrier := false, false
	c := versionChangeUnderWrites(t, newCluster(t, "3.5.35"), "3.7.3", 6, func(s etcdv1alpha1.EtcdClusterStatus) {
		if s.CurrentVersion == "3.6.16" {
			seen36 = true
		}
		if s.LegacyWALIndex > 0 {
			sawBarrier = true
		}
	})
	if !seen36 {
		t.Error("the cluster never ran 3.6.16: the operator did not step through 3.6")
	}
	if !sawBarrier || env.Get(t, c).Status.LegacyWALIndex == 0 {
		t.Error("status.legacyWALIndex was never recorded for a cluster with 3.5 history")
	}
	requireEvent(t, c, "etcd 3.7 cannot replay")
}

// 3.6 → 3.5 through etcd's downgrade API: enable, wait for every member's storage to migrate, then
// roll the members one at a time.
func TestDowngrade36To35UnderWrites(t *testing.T) {
	framework.Parallel(t, 40*time.Second)
	c := versionChangeUnderWrites(t, newCluster(t, "3.6.16"), "3.5.35", 3, nil)
	requireEvent(t, c, "enabling etcd's downgrade to 3.5.0")
}

// A member that cannot start at the new version (its image cannot be pulled) is rolled back after
// spec.maintenance.upgradeTimeout, the upgrade stops with Degraded/UpgradeFailed, no other member is
// touched, and a new spec.version clears the block.
func TestFailedUpgradeIsRolledBack(t *testing.T) {
	framework.Parallel(t, 55*time.Second)
	ns := env.NewNamespace(t, "e2e-")
	env.StartOperator(t, ns, "", "RELATED_IMAGE_ETCD_V3_7_3=localhost/etcd:does-not-exist")
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"}}
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	c.Spec.Maintenance.UpgradeTimeout = "30s"
	if err := env.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	cl := env.EtcdClient(t, c)
	w := framework.StartWriter(cl, "/failed/")
	uids := env.MemberPodUIDs(t, c)

	setVersion(t, c, "3.7.3")
	framework.WaitFor(t, "the failed step is reported and rolled back", 4*time.Minute, func() error {
		s := env.Get(t, c).Status
		d := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionDegraded)
		if s.UpgradeBlocked == nil || d == nil || d.Status != metav1.ConditionTrue || d.Reason != "UpgradeFailed" {
			return fmt.Errorf("blocked %+v, Degraded %+v", s.UpgradeBlocked, d)
		}
		for _, m := range s.Members {
			if m.Version != "3.6.16" || !m.Healthy {
				return fmt.Errorf("member %s at %s healthy=%v", m.Name, m.Version, m.Healthy)
			}
		}
		return nil
	})
	s := env.Get(t, c).Status
	if s.UpgradeBlocked.Version != "3.7.3" || s.CurrentVersion != "3.6.16" {
		t.Fatalf("blocked %+v, current %s", s.UpgradeBlocked, s.CurrentVersion)
	}
	restarted := 0
	for name, uid := range env.MemberPodUIDs(t, c) {
		if uids[name] != uid {
			restarted++
		}
	}
	if restarted != 1 {
		t.Errorf("%d pods restarted; only the member that failed should be", restarted)
	}
	acked, failed := w.Finish()
	t.Logf("writer: %d acknowledged, %d failed attempts during the failed step", len(acked), failed)
	env.RefreshEndpoints(t, cl, c)
	framework.CheckWrites(t, cl, w)

	// Going back to the running version clears the block.
	setVersion(t, c, "3.6.16")
	framework.WaitFor(t, "the block is cleared", time.Minute, func() error {
		s := env.Get(t, c).Status
		d := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionDegraded)
		if s.UpgradeBlocked != nil || d == nil || d.Status != metav1.ConditionFalse {
			return fmt.Errorf("blocked %+v, Degraded %+v", s.UpgradeBlocked, d)
		}
		return nil
	})
}
