//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = framework.Setup("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.Exit(code)
}

const (
	clients = 6
	// convergeBound is how long the cluster may take to converge after a healed fault.
	convergeBound = 4 * time.Minute
	// hold is how long a fault that lasts (partition, stopped kubelet) is held.
	hold = 20 * time.Second
)

// run is one chaos run: the cluster, the operator of the moment, the workload and what happened.
type run struct {
	t        *testing.T
	c        *etcdv1alpha1.EtcdCluster
	op       *framework.Operator
	rng      *rand.Rand
	w        *Workload
	cl       *clientv3.Client
	replicas int32
	phases   []Phase
}

// A fault injects itself, holds, heals, and leaves the cluster at the replicas it returns.
type fault func(r *run) (replicas int32, err error)

var faults = map[string]fault{
	"scale-1-3":         scaleTo(3),
	"kill-follower":     killMember(etcdv1alpha1.RoleFollower),
	"kill-leader":       killMember(etcdv1alpha1.RoleLeader),
	"kill-operator":     killOperator,
	"pvc-lost":          pvcLost,
	"partition":         partition,
	"kubelet-stop":      kubeletStop,
	"scale-3-5-3-crash": scaleWithCrashes,
	"upgrade-downgrade": upgradeDowngrade,
	"full-disk":         fullDisk,
	"node-poweroff":     nodePowerOff,
	"node-partition":    nodePartition,
	"node-drain":        nodeDrain,
	"node-deleted":      nodeDeleted,
}

// TestChaos runs the workload against an operator-managed cluster for CHAOS_DURATION (default 3m)
// while faults hit it: first the CHAOS_FAULTS schedule (a comma list; default: DefaultSchedule, every
// fault kind once), then faults drawn at random with CHAOS_SEED (default: the clock; printed, so a run
// can be replayed). It fails on any linearizability violation, any lost acknowledged write, any write
// nobody made, a history with too few answered operations (MinAcknowledged, and some in every phase),
// or a cluster that does not converge within convergeBound after a fault.
// CHAOS_RESULTS names a directory for the bench results: every run's, failed ones too.
func TestChaos(t *testing.T) {
	duration := 3 * time.Minute
	if d := os.Getenv("CHAOS_DURATION"); d != "" {
		var err error
		if duration, err = time.ParseDuration(d); err != nil {
			t.Fatalf("CHAOS_DURATION: %v", err)
		}
	}
	schedule := DefaultSchedule
	if s := os.Getenv("CHAOS_FAULTS"); s != "" {
		schedule = strings.Split(s, ",")
	}
	// The results are written before the run's failures are reported (record), so a failed run is
	// recorded as it was: its violations and lost writes are what the results are for.
	record := func(rep Report) {
		out := os.Getenv("CHAOS_RESULTS")
		if out == "" {
			return
		}
		command := fmt.Sprintf("make chaos DURATION=%s CHAOS_SEED=%d CHAOS_FAULTS=%s", duration, rep.Seed, strings.Join(schedule, ","))
		if err := WriteResults(out, rep.Results(command, time.Now())); err != nil {
			t.Error(err)
		}
		if err := framework.WriteBenchmarksSection(filepath.Join("..", "..", "BENCHMARKS.md"), "chaos", rep.Markdown(command, time.Now())); err != nil {
			t.Error(err)
		}
	}
	rep := chaos(t, duration, schedule, true, func(*etcdv1alpha1.EtcdCluster) {}, record)
	if missing := rep.Missing(schedule); len(missing) > 0 && rep.Failure == "" {
		t.Errorf("faults of the schedule that did not run: %v", missing)
	}
}

// TestChaosFullDisk fills a member's volume until no byte is left, then kills a member, on a cluster
// whose volumes are memory-backed (a tmpfs the kubelet sizes to storage.size, which can be filled
// from the host without filling the host's disk; local-path volumes have no size of their own).
func TestChaosFullDisk(t *testing.T) {
	chaos(t, 0, []string{"full-disk", "kill-follower"}, false, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Storage.Medium = etcdv1alpha1.StorageMediumMemory
	}, nil)
}

// chaos runs the schedule, then random faults until duration has passed, under the workload, and
// checks the history; withKube adds a kube-apiserver on the cluster and its workload (kube_test.go);
// mutate adjusts the cluster before it is created; record, when set, gets the report before any
// failure of the run is reported.
func chaos(t *testing.T, duration time.Duration, schedule []string, withKube bool, mutate func(*etcdv1alpha1.EtcdCluster), record func(Report)) Report {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	for _, name := range schedule {
		if faults[name] == nil {
			t.Fatalf("CHAOS_FAULTS: no fault %q", name)
		}
	}
	t.Logf("chaos: seed %d (CHAOS_SEED=%d replays it), duration %s, schedule %v", seed, seed, duration, schedule)

	ns := env.NewNamespace(t, "e2e-chaos-")
	r := &run{t: t, rng: rand.New(rand.NewPCG(seed, 0)), replicas: 3}
	r.op = env.StartOperator(t, ns, "")
	r.c = &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	r.c.Spec.Version = versions.Default
	r.c.Spec.Storage.Size = resource.MustParse("256Mi")
	// No compaction during the run: etcd's event log from the workload's start settles every write.
	r.c.Spec.Etcd.AutoCompactionRetention = "0"
	if len(schedule) > 0 && schedule[0] == "scale-1-3" {
		r.replicas = 1
	}
	r.c.Spec.Replicas = r.replicas
	mutate(r.c)
	if err := env.K8s.Create(context.Background(), r.c); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, r.c, r.replicas, convergeBound)

	eps := watchEndpoints(t, r.c)
	var cls []*clientv3.Client
	for range clients {
		cl := env.EtcdClient(t, r.c)
		stop := framework.FollowPods(cl, eps)
		t.Cleanup(stop)
		cls = append(cls, cl)
	}
	r.cl = cls[0]
	var kube *kubeWorkload
	if withKube {
		kube = startKubeWorkload(t, env.KubeAPIServer(t, r.c, eps, "/kube-chaos"), 3, seed)
	}
	var err error
	r.w, err = Start(context.Background(), Config{Prefix: "/chaos/", Keys: 10, Seed: seed, OpTimeout: 2 * time.Second, Pause: 20 * time.Millisecond}, cls)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(15 * time.Second)
	r.phases = append(r.phases, Phase{Name: "steady", End: r.w.Now()})

	var failure error
	for i := 0; failure == nil && (i < len(schedule) || r.w.Now() < duration); i++ {
		name := ""
		if i < len(schedule) {
			name = schedule[i]
		} else {
			drawn := append(slices.Clone(RandomFaults), SoakFaults...)
			name = drawn[r.rng.IntN(len(drawn))]
		}
		failure = r.inject(name)
		time.Sleep(5 * time.Second) // let the workload see the converged cluster before the next fault
	}
	history := r.w.Stop()
	runFor := r.w.Now()
	if kube != nil {
		kube.finish(t)
	}

	env.RefreshEndpoints(t, r.cl, r.c)
	dir := os.Getenv("CHAOS_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "etcd-autopilot-chaos")
	}
	v, err := Verify(r.w, history, r.cl, clients, 5*time.Minute, dir)
	if err != nil {
		t.Fatal(err)
	}
	history, res, result, path, checkErr := v.History, v.Resolution, v.Result, v.Visualisation, v.CheckErr
	t.Logf("porcupine: %s for %d operations (%d indeterminate writes settled by etcd's log, %d never happened) in %s",
		result, len(v.Resolved), res.Settled, res.Dropped, v.CheckTook.Round(time.Millisecond))

	rep := Summarise(seed, history, r.phases, runFor)
	rep.Settled, rep.Lost, rep.Phantom, rep.Linearizable = res.Settled, len(res.Lost), len(res.Phantom), string(result)
	for _, p := range r.phases[1:] { // after steady
		rep.Faults = append(rep.Faults, p.Name)
	}
	if failure != nil {
		rep.Failure = failure.Error()
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("chaos report:\n%s", b)
	t.Logf("faults run, in order: %v", rep.Faults)
	if record != nil {
		record(rep)
	}

	if failure != nil {
		t.Errorf("seed %d: %v", seed, failure)
	}
	if err := rep.Progress(MinAcknowledged, v.Final); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
	if checkErr != nil {
		t.Errorf("seed %d: %v", seed, checkErr)
	}
	if result != porcupine.Ok {
		t.Errorf("seed %d: the history is %s: visualisation in %s", seed, result, path)
	}
	for _, op := range res.Lost {
		t.Errorf("seed %d: acknowledged write lost: %s %s=%q at revision %d (client %d, %s–%s)", seed, op.Input.Kind, op.Input.Key, op.Input.Value, op.Output.Revision, op.Client, op.Call, op.Return)
	}
	for _, e := range res.Phantom {
		t.Errorf("seed %d: write nobody made (or made twice): %s=%q at revision %d", seed, e.Key, e.Value, e.Revision)
	}
	return rep
}

// watchEndpoints lists the member pods' client URLs every second until the test ends, for the
// clients and the relay to share (each asking the API server itself would be throttled).
func watchEndpoints(t *testing.T, c *etcdv1alpha1.EtcdCluster) func() ([]string, error) {
	var mu sync.Mutex
	eps := env.PodEndpoints(t, c)
	t.Cleanup(framework.Every(time.Second, func() {
		if now, err := env.CurrentEndpoints(c); err == nil && len(now) > 0 {
			mu.Lock()
			eps = now
			mu.Unlock()
		}
	}))
	return func() ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return eps, nil
	}
}

// inject runs one fault as a phase, then measures how long the cluster takes to converge.
func (r *run) inject(name string) error {
	r.t.Logf("%s fault %s (%d members)", time.Now().Format("15:04:05"), name, r.replicas)
	p := Phase{Name: name, Start: r.w.Now()}
	n, err := faults[name](r)
	if err != nil {
		return fmt.Errorf("fault %s: %w", name, err)
	}
	healed := time.Now()
	if err := r.waitConverged(n, convergeBound); err != nil {
		return fmt.Errorf("after fault %s: %w", name, err)
	}
	r.replicas = n
	p.End, p.Converge = r.w.Now(), time.Since(healed)
	r.phases = append(r.phases, p)
	r.t.Logf("%s fault %s: converged at %d members %.1fs after healing", time.Now().Format("15:04:05"), name, n, p.Converge.Seconds())
	return nil
}

// waitConverged waits until the operator reports the cluster converged at n members and etcd and
// the pods agree (settled): the operator's status alone may not have seen a fault yet.
func (r *run) waitConverged(n int32, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		err := env.Converged(r.c, n)
		if err == nil {
			err = r.settled(n)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not converged at %d members within %s: %w", n, bound, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// settled checks the world itself: n ready member pods, n voting etcd members named after exactly
// those pods, each answering and agreeing on one leader.
func (r *run) settled(n int32) error {
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(r.c.Namespace), client.MatchingLabels(naming.Labels(r.c.Name))); err != nil {
		return err
	}
	ready := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s is terminating", p.Name)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready[p.Name] = p.Status.PodIP
			}
		}
	}
	if len(ready) != int(n) || len(pods.Items) != int(n) {
		return fmt.Errorf("%d of %d member pods ready, want %d", len(ready), len(pods.Items), n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	members, err := r.cl.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("member list: %w", err)
	}
	if len(members.Members) != int(n) {
		return fmt.Errorf("%d etcd members, want %d", len(members.Members), n)
	}
	var leader uint64
	for _, m := range members.Members {
		ip, ok := ready[m.Name]
		if !ok || m.IsLearner {
			return fmt.Errorf("etcd member %q (learner %v) is not one of the ready pods", m.Name, m.IsLearner)
		}
		st, err := r.cl.Status(ctx, naming.EndpointForIP(ip, true))
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
		if leader != 0 && st.Leader != leader || st.Leader == 0 {
			return fmt.Errorf("members disagree on the leader (%x, %x)", leader, st.Leader)
		}
		leader = st.Leader
	}
	return nil
}

func scaleTo(n int32) fault {
	return func(r *run) (int32, error) {
		return n, env.K8s.Patch(context.Background(), r.c, client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)))
	}
}

// member picks a member pod of the role (as etcd itself says: the leader is the member every
// endpoint names), at random among several.
func (r *run) member(role etcdv1alpha1.MemberRole) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(r.c.Namespace), client.MatchingLabels(naming.Labels(r.c.Name))); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var leader uint64
	ids := map[string]uint64{}
	var candidates []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		st, err := r.cl.Status(ctx, naming.EndpointForIP(p.Status.PodIP, true))
		if err != nil {
			continue
		}
		leader, ids[p.Name] = st.Leader, st.Header.MemberId
		candidates = append(candidates, p)
	}
	var match []*corev1.Pod
	for _, p := range candidates {
		if (ids[p.Name] == leader) == (role == etcdv1alpha1.RoleLeader) {
			match = append(match, p)
		}
	}
	if len(match) == 0 {
		return nil, fmt.Errorf("no %s among %d member pods that answered", role, len(candidates))
	}
	return match[r.rng.IntN(len(match))], nil
}

// killMember deletes a member pod at once (no grace): the operator brings it back on its volume.
func killMember(role etcdv1alpha1.MemberRole) fault {
	return func(r *run) (int32, error) {
		p, err := r.member(role)
		if err != nil {
			return 0, err
		}
		r.t.Logf("  killing %s %s", role, p.Name)
		return r.replicas, env.K8s.Delete(context.Background(), p, client.GracePeriodSeconds(0))
	}
}

// killOperator SIGKILLs the operator while a member is down (so it is killed with work to do),
// and starts a new one a few seconds later.
func killOperator(r *run) (int32, error) {
	p, err := r.member(etcdv1alpha1.RoleFollower)
	if err != nil {
		return 0, err
	}
	if err := env.K8s.Delete(context.Background(), p, client.GracePeriodSeconds(0)); err != nil {
		return 0, err
	}
	time.Sleep(time.Duration(r.rng.IntN(3000)) * time.Millisecond)
	r.op.Kill()
	time.Sleep(5 * time.Second)
	r.op = env.StartOperator(r.t, r.c.Namespace, "")
	return r.replicas, nil
}

// pvcLost deletes a follower's claim and pod: its data is gone and it is replaced by a new member.
func pvcLost(r *run) (int32, error) {
	p, err := r.member(etcdv1alpha1.RoleFollower)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	for _, vol := range p.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: vol.PersistentVolumeClaim.ClaimName}}
			if err := env.K8s.Delete(ctx, pvc); err != nil {
				return 0, err
			}
		}
	}
	r.t.Logf("  lost the volume of %s", p.Name)
	return r.replicas, env.K8s.Delete(ctx, p, client.GracePeriodSeconds(0))
}

// partition cuts one member (any role) off from its peers for hold.
func partition(r *run) (int32, error) {
	role := etcdv1alpha1.RoleFollower
	if r.rng.IntN(2) == 0 {
		role = etcdv1alpha1.RoleLeader
	}
	p, err := r.member(role)
	if err != nil {
		return 0, err
	}
	r.t.Logf("  partitioning %s %s for %s", role, p.Name, hold)
	heal := framework.PartitionPeers(r.t, p.Status.PodIP)
	time.Sleep(hold)
	heal()
	return r.replicas, nil
}

// kubeletStop freezes the kubelet (SIGSTOP) of a follower's node for hold: pods keep running,
// nobody reports on them or restarts them. The kubelet is the local cluster's (hack/cluster records
// its pid: kubelet for the first node, kubelet-K for node K).
func kubeletStop(r *run) (int32, error) {
	p, err := r.member(etcdv1alpha1.RoleFollower)
	if err != nil {
		return 0, err
	}
	kubelet := "kubelet"
	if k, ok := framework.NodeIndex(p.Spec.NodeName); ok {
		kubelet += "-" + k
	}
	pids, err := os.ReadFile(filepath.Join(filepath.Dir(env.Kubeconfig), "pids"))
	if err != nil {
		return 0, fmt.Errorf("the local cluster's pid file: %w", err)
	}
	pid := 0
	for _, line := range strings.Split(string(pids), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == kubelet {
			pid, _ = strconv.Atoi(f[1])
		}
	}
	if pid == 0 {
		return 0, fmt.Errorf("no %s in the local cluster's pid file", kubelet)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("stop %s %d: %w", kubelet, pid, err)
	}
	cont := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	r.t.Cleanup(cont)
	// A member dies while nobody on the node can restart it: it comes back only with the kubelet.
	r.t.Logf("  %s (node %s) stopped; deleting %s", kubelet, p.Spec.NodeName, p.Name)
	_ = env.K8s.Delete(context.Background(), p, client.GracePeriodSeconds(0))
	time.Sleep(hold)
	cont()
	return r.replicas, nil
}

// scaleWithCrashes scales 3 → 5 → 3 with the operator killed at a failpoint on the way up
// (after adding a member) and on the way down (after removing one); a fresh operator finishes.
func scaleWithCrashes(r *run) (int32, error) {
	if r.replicas != 3 {
		return r.replicas, nil
	}
	for _, step := range []struct {
		n  int32
		fp string
	}{{5, failpoint.AfterMemberAdd}, {3, failpoint.AfterMemberRemove}} {
		r.op.Stop()
		r.op = env.StartOperator(r.t, r.c.Namespace, step.fp)
		if _, err := scaleTo(step.n)(r); err != nil {
			return 0, err
		}
		if code := r.op.WaitExit(r.t, 2*time.Minute); code != failpoint.ExitCode {
			return 0, fmt.Errorf("operator exit code %d at %s, want the failpoint's %d", code, step.fp, failpoint.ExitCode)
		}
		r.op = env.StartOperator(r.t, r.c.Namespace, "")
		if err := r.waitConverged(step.n, convergeBound); err != nil {
			return 0, err
		}
	}
	return 3, nil
}

// upgradeDowngrade moves the cluster one minor up and back down, under the workload.
func upgradeDowngrade(r *run) (int32, error) {
	from := versions.Default
	to := versions.Supported[len(versions.Supported)-1]
	for _, v := range []string{to, from} {
		patch := fmt.Appendf(nil, `{"spec":{"version":%q}}`, v)
		if err := env.K8s.Patch(context.Background(), r.c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			return 0, err
		}
		deadline := time.Now().Add(convergeBound)
		for {
			cur := &etcdv1alpha1.EtcdCluster{}
			if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(r.c), cur); err != nil {
				return 0, err
			}
			if cur.Status.CurrentVersion == v && env.Converged(r.c, r.replicas) == nil && r.settled(r.replicas) == nil {
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("not at %s within %s: current %s", v, convergeBound, cur.Status.CurrentVersion)
			}
			time.Sleep(time.Second)
		}
		r.t.Logf("  at %s", v)
	}
	return r.replicas, nil
}

// fullDisk fills a follower's memory-backed volume from the host until no byte is left, holds, and
// frees it. It refuses a tmpfs the kubelet did not size (it would fill the machine's memory).
func fullDisk(r *run) (int32, error) {
	if r.c.Spec.Storage.Medium != etcdv1alpha1.StorageMediumMemory {
		return 0, fmt.Errorf("full-disk needs a memory-backed cluster")
	}
	p, err := r.member(etcdv1alpha1.RoleFollower)
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(env.KubeletDir(p.Spec.NodeName), "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "data")
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("the volume of %s on the host: %w", p.Name, err)
	}
	size := int64(st.Blocks) * st.Bsize
	if limit := r.c.Spec.Storage.Size.Value(); size > limit+limit/8 {
		return 0, fmt.Errorf("the tmpfs of %s is %d bytes, not sized to storage.size %d: not filling it", p.Name, size, limit)
	}
	filler := filepath.Join(dir, "chaos-filler")
	r.t.Cleanup(func() { _ = os.Remove(filler) })
	f, err := os.Create(filler)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var filled int64
	for filled <= size {
		n, err := f.Write(buf)
		filled += int64(n)
		if err != nil {
			break // ENOSPC: full
		}
	}
	_ = f.Close()
	_ = syscall.Statfs(dir, &st)
	r.t.Logf("  filled the volume of %s with %d MiB (%d bytes left) for %s", p.Name, filled>>20, int64(st.Bavail)*st.Bsize, hold)
	time.Sleep(hold)
	if now := (&corev1.Pod{}); env.K8s.Get(context.Background(), client.ObjectKeyFromObject(p), now) == nil && len(now.Status.ContainerStatuses) > 0 {
		cs := now.Status.ContainerStatuses[0]
		r.t.Logf("  %s with a full volume: ready %v, %d restarts", p.Name, cs.Ready, cs.RestartCount)
	}
	if err := os.Remove(filler); err != nil {
		return 0, fmt.Errorf("free the volume of %s: %w", p.Name, err)
	}
	return r.replicas, nil
}
