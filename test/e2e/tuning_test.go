//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// The snapshot count is raised once two one-minute windows in a row show more than 67 entries a second
// (twice the default 10000 in five minutes of writes). The test holds well above that beside the other
// tests of the suite: tuningLoad puts a second from tuningLoadWorkers at once (concurrent puts are
// batched by etcd, so the rate holds where one writer's round trips, slowed by a loaded machine, would
// not), and tuningWriters framework writers beside it, whose every acknowledged put is checked after
// the roll.
const (
	tuningLoad        = 150
	tuningLoadWorkers = 16
	tuningWriters     = 2
)

// Item 6 of issue 14: a cluster that leaves spec.etcd.snapshotCount unset, under a sustained write
// rate, gets a snapshot count tuned from that rate (status.tuning, with the evidence), and its members
// are restarted with it one at a time, never more than one member pod down, with no acknowledged write
// lost.
func TestAutoTuningSnapshotCountFromWriteRate(t *testing.T) {
	framework.Parallel(t, 180*time.Second)
	start := time.Now()
	// The election timing is the user's (a value other than the default, which counts as unset), so that only
	// the snapshot count is tuned: on a loaded machine the peers' round trips alone can get the heartbeat
	// tuned first, and its roll would hold the one asked here.
	c := newCluster(t, "", func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Etcd.HeartbeatIntervalMillis, c.Spec.Etcd.ElectionTimeoutMillis = 200, 2000
	})
	t.Logf("cluster converged: %s", time.Since(start).Round(time.Second))
	if got := tunedValue(env.Get(t, c), etcdv1alpha1.TunableSnapshotCount); got.Source != etcdv1alpha1.TuningSourceDefault || got.Value != "10000" {
		t.Fatalf("before any writes: snapshotCount %+v, want the default 10000", got)
	}
	cl := env.EtcdClient(t, c)
	stopFollowing := followPods(cl, c)
	uids := env.MemberPodUIDs(t, c)
	var writers []*framework.Writer
	for i := range tuningWriters {
		writers = append(writers, framework.StartWriter(cl, fmt.Sprintf("/tuning/%d/", i)))
	}
	stopLoad := startLoad(cl, "/tuning/load/", tuningLoad, tuningLoadWorkers)
	t.Cleanup(func() { stopLoad() }) // when a wait below fails
	writing := time.Now()

	// One member down at most throughout: its pod missing, going away or not Ready (what the client
	// Service routes to). The fewest ready members status reported is logged beside it: it also drops
	// for a moment when the operator's own call to a member times out on a loaded machine.
	var mu sync.Mutex
	worstPods, fewestReady := 0, int32(3)
	stopWatching := framework.Every(250*time.Millisecond, func() {
		down, err := membersDown(c, uids)
		if err != nil {
			return
		}
		// Not env.Get: a t.Fatal from this goroutine after the test ended (a failed wait below) panics
		// the whole e2e binary, and every test running beside it with it.
		got := &etcdv1alpha1.EtcdCluster{}
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
			return
		}
		ready := got.Status.ReadyReplicas
		mu.Lock()
		worstPods, fewestReady = max(worstPods, down), min(fewestReady, ready)
		mu.Unlock()
	})
	t.Cleanup(stopWatching) // before the namespace's own cleanup, when a wait below fails

	var tuned etcdv1alpha1.TunedValue
	framework.WaitFor(t, "snapshotCount tuned from the write rate", 4*time.Minute, func() error {
		tuned = tunedValue(env.Get(t, c), etcdv1alpha1.TunableSnapshotCount)
		if tuned.Source != etcdv1alpha1.TuningSourceTuned {
			return fmt.Errorf("snapshotCount %+v", tuned)
		}
		return nil
	})
	t.Logf("snapshotCount tuned to %s after %s of writes: %s", tuned.Value, time.Since(writing).Round(time.Second), tuned.Evidence)
	if !strings.Contains(tuned.Evidence, "write rate") {
		t.Errorf("evidence %q does not give the write rate", tuned.Evidence)
	}
	framework.WaitFor(t, "every member restarted with the tuned snapshot count", 3*restartBudget, func() error {
		return membersRunWith(c, uids, "--snapshot-count="+tuned.Value)
	})
	rolled := time.Now()
	env.WaitConverged(t, c, 3, convergeTimeout)
	t.Logf("members rolled %s after the tuning, converged after %s", rolled.Sub(writing).Round(time.Second), time.Since(writing).Round(time.Second))
	stopWatching()

	loaded := stopLoad()
	time.Sleep(2 * time.Second)
	var acked, failed int
	for _, w := range writers {
		keys, f := w.Finish()
		acked, failed = acked+len(keys), failed+f
		env.RefreshEndpoints(t, cl, c)
		framework.CheckWrites(t, cl, w)
	}
	stopFollowing()
	t.Logf("writers: %d acknowledged, 0 lost, %d failed attempts (retried) during the roll; load: %d puts acknowledged (%.0f/s in all)",
		acked, failed, loaded, float64(acked+loaded)/time.Since(writing).Seconds())
	t.Logf("during the roll: at most %d member pods down at once; status reported as few as %d ready members", worstPods, fewestReady)
	if worstPods > 1 {
		t.Errorf("%d member pods down at once; a tuning roll restarts one member at a time", worstPods)
	}
	// One event names every value a pass tuned ("auto-tuning heartbeatIntervalMillis …; snapshotCount …").
	requireEvent(t, c, "snapshotCount 10000 -> "+tuned.Value)
	// The heartbeat is the user's, and stays so under any round trips measured beside it.
	if got := tunedValue(env.Get(t, c), etcdv1alpha1.TunableHeartbeatInterval); got.Source != etcdv1alpha1.TuningSourceUser || got.Value != "200" {
		t.Errorf("heartbeat %+v, want the user's 200", got)
	}
	t.Logf("test done in %s", time.Since(start).Round(time.Second))
}

func tunedValue(c *etcdv1alpha1.EtcdCluster, name string) etcdv1alpha1.TunedValue {
	for _, v := range c.Status.Tuning.Values {
		if v.Name == name {
			return v
		}
	}
	return etcdv1alpha1.TunedValue{}
}

// membersDown counts the members of c (named in uids) whose pod is missing, going away or not ready.
func membersDown(c *etcdv1alpha1.EtcdCluster, uids map[string]string) (int, error) {
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return 0, err
	}
	up := 0
	for _, p := range pods.Items {
		if _, member := uids[p.Name]; !member || p.DeletionTimestamp != nil {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				up++
			}
		}
	}
	return len(uids) - up, nil
}

// membersRunWith fails unless every member's pod was replaced since uids and runs etcd with flag.
func membersRunWith(c *etcdv1alpha1.EtcdCluster, uids map[string]string, flag string) error {
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return err
	}
	var pending []string
	for _, p := range pods.Items {
		if _, member := uids[p.Name]; !member {
			continue
		}
		if string(p.UID) == uids[p.Name] || !strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), flag) {
			pending = append(pending, p.Name)
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("%v not restarted with %s yet", pending, flag)
	}
	return nil
}

// startLoad puts small values under prefix, at most rate a second from workers goroutines at once, until
// the returned stop (idempotent), which says how many puts etcd acknowledged. A failed put is not retried: the load is
// there for its rate; the framework writers beside it are what checks that nothing acknowledged is lost.
func startLoad(cl *clientv3.Client, prefix string, rate, workers int) (stop func() int) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	done := make(chan struct{})
	var wg sync.WaitGroup
	var acked atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				// A thousand keys per worker, overwritten: the rate, not the key space, is what counts.
				if _, err := cl.Put(ctx, fmt.Sprintf("%s%02d/%03d", prefix, w, i%1000), "x"); err == nil {
					acked.Add(1)
				}
				cancel()
			}
		}()
	}
	return sync.OnceValue(func() int {
		close(done)
		wg.Wait()
		tick.Stop()
		return int(acked.Load())
	})
}
