//go:build bench

package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
	"github.com/etcd-autopilot/etcd-autopilot/test/benchdoc"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// benchEnv are the settings of test/bench that change what a run measures; a result's command
// names those that were set.
var benchEnv = []string{"BENCH_REPS", "BENCH_SIZES", "BENCH_NETWORK_POLICY", "BENCH_METRIC_SUFFIX", "SCALE_STEPS"}

// benchCommand reproduces the results of the test t: its own name as the -run pattern, and the
// settings it ran with.
func benchCommand(t *testing.T) string {
	run := "'^" + t.Name() + "$'"
	return framework.BenchCommand(benchEnv, fmt.Sprintf("make bench BENCH_RUN=%s (go test -tags bench ./test/bench/ -run %s -count=1 -v)", run, run))
}

const (
	storageSize = "256Mi"
	timeout     = 5 * time.Minute
	goal        = 1.1 // issue 17: lifecycle ratios
	replaceGoal = 2.5 // a replacement does more than a restart: remove, add a learner, catch up, promote
)

// TestBench takes every lifecycle measurement in one run, interleaving bare and operator runs of the
// same size so that drift in the machine's load hits both sides of each ratio alike. Both sides end on
// the same observable, checked by the same prober (prober_test.go); recovery and replacement are timed
// separately for a follower and for the leader.
func TestBench(t *testing.T) {
	reps := 5
	if s := os.Getenv("BENCH_REPS"); s != "" {
		reps, _ = strconv.Atoi(s)
	}
	image, err := versions.Image("3.6.16") // the operator's default version, so both sides run the same binary
	if err != nil {
		t.Fatal(err)
	}
	samples := map[string][]float64{}
	add := func(key string, d time.Duration) {
		samples[key] = append(samples[key], d.Seconds())
		t.Logf("%s: %.2fs", key, d.Seconds())
	}
	// BENCH_SIZES narrows the cluster sizes (e.g. 3: only the recovery and replacement figures and
	// time_to_available_3); the figures of the sizes left out keep their committed results.
	sizes := intsFromEnv(t, "BENCH_SIZES", []int{1, 3, 5})
	// BENCH_NETWORK_POLICY=off runs the operator's clusters with spec.networkPolicy.enabled: false, as
	// the bare baseline runs: what the default policy costs (its members wait for admission) apart from
	// the operator. Its figures get their own metrics (noPolicySuffix).
	policy := os.Getenv("BENCH_NETWORK_POLICY") != "off"
	suffix := ""
	if !policy {
		suffix = noPolicySuffix
	}
	start := time.Now()
	for r := 1; r <= reps; r++ {
		for _, n := range sizes {
			t.Logf("repetition %d/%d, %d members", r, reps, n)
			bareRun(t, image, n, add)
			operatorRun(t, n, policy, func(key string, d time.Duration) { add(key+suffix, d) })
		}
	}
	t.Logf("all measurements took %s", time.Since(start).Round(time.Second))
	writeResults(t, lifecycleMetrics(suffix), samples)
}

// noPolicySuffix names the figures of operator clusters without their NetworkPolicy.
const noPolicySuffix = "_without_networkpolicy"

// roles are the two members whose loss is timed apart: losing the leader adds an election.
var roles = []string{"follower", "leader"}

// victim picks the member pod of the given role.
func victim(t *testing.T, p *prober, role string) string {
	t.Helper()
	var name string
	var err error
	waitFor(t, "a "+role+" to pick", timeout, func() (bool, error) {
		if role == "leader" {
			name, err = p.leader()
		} else {
			name, err = p.follower()
		}
		return err == nil, err
	})
	return name
}

// --- bare etcd: what etcd needs without any operator --------------------------------------------

// bareRun starts n bare members and times them to serving; with n=3 it then deletes and recreates a
// follower's pod, then the leader's (each keeping its PVC), and times each back to serving.
func bareRun(t *testing.T, image string, n int, add func(string, time.Duration)) {
	ns, cleanup := newNamespace(t)
	defer cleanup()
	ctx := context.Background()
	b := newBare(t, ns, image, n)
	p := newProber(ns, bareClientService, bareLabels, b.clientTLS)
	defer p.close()
	waitQuiet(t)

	t0 := time.Now()
	b.create(t)
	st := &startStages{t0: t0, pods: map[string]*stages{}}
	add(fmt.Sprintf("bare_available_%d", n), waitFor(t, fmt.Sprintf("%d bare members serving", n), timeout, servingNStaged(p, n, bareLabels, st)).Sub(t0))
	t.Logf("bare_available_%d stages (created at %s, namespace %s):%s", n, t0.UTC().Format("15:04:05.000"), ns, st)
	saveMemberLogs(t, ns, bareLabels, "available")
	if n != 3 {
		return
	}
	// Then the same without probes on the recreated pod (its Ready then says only that the container
	// runs), as the official etcd operator's pods have none: the same prober still waits for the
	// member to answer a linearizable read, so this is the floor of a recovery whose readiness is not
	// tied to etcd serving.
	// Last, the members protected as the operator protects its own (bare.protect), recreated as they
	// were and then with a wait for a peer's admission (the operator's answer to the same race), with
	// probes: what a careful person pays for that protection by hand, and the same finish line.
	variants := []struct {
		suffix  string
		how     bareRecreate
		protect bool
	}{
		{"", bareRecreate{probes: true}, false},
		{withoutProbesSuffix, bareRecreate{}, false},
		{withPolicySuffix, bareRecreate{probes: true}, true},
		{withPolicyAndWaitSuffix, bareRecreate{probes: true, peerWait: true}, false},
	}
	for _, v := range variants {
		if v.protect {
			b.protect(t)
		}
		for _, role := range roles {
			// Recovery by hand: the pod goes (as a node restart or eviction would take it), its volume
			// stays, and it is recreated as soon as its name is free, exactly as a StatefulSet would do.
			waitQuiet(t)
			waitSettled(t, ns, bareLabels)
			name := victim(t, p, role)
			var pod *corev1.Pod
			pod, t0 = deletePod(t, ns, name)
			st := newStages(t0)
			waitFor(t, name+" gone", timeout, func() (bool, error) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
			st.mark("gone")
			b.recreatePod(t, name, image, v.how)
			add("bare_recovery_"+role+v.suffix, waitFor(t, name+" serving again", timeout, func() (bool, error) {
				st.observe(p, name, pod.UID)
				return p.serving(n)
			}).Sub(t0))
			t.Logf("bare_recovery_%s%s stages: %s", role, v.suffix, st)
		}
	}
}

// withoutProbesSuffix names the bare recoveries whose recreated pod has no probes; vsUnprobedSuffix,
// the operator's recoveries compared with them.
const (
	withoutProbesSuffix = "_without_probes"
	vsUnprobedSuffix    = "_vs_bare_without_probes"
)

// withPolicySuffix names the bare recoveries of members protected by a NetworkPolicy (bare.protect);
// withPolicyAndWaitSuffix, those whose recreated pod also waits for a peer's admission first; and
// vsProtectedSuffix, the operator's recoveries compared with the latter: the same protection by hand.
const (
	withPolicySuffix        = "_with_networkpolicy"
	withPolicyAndWaitSuffix = "_with_networkpolicy_and_peer_wait"
	vsProtectedSuffix       = "_vs_bare_with_networkpolicy_and_peer_wait"
)

// deletePod deletes pod ns/name and returns it as it was, with the time of the deletion.
func deletePod(t *testing.T, ns, name string) (*corev1.Pod, time.Time) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := k8s.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod, t0
}

func servingN(p *prober, n int) func() (bool, error) {
	return func() (bool, error) { return p.serving(n) }
}

// startStages times each of n new members' stages from t0 while it waits for them to serve, so the
// log says which stage (a volume provisioned, the pod scheduled, etcd running) a cluster's start spends
// its time in.
type startStages struct {
	t0   time.Time
	pods map[string]*stages
}

func servingNStaged(p *prober, n int, labels map[string]string, st *startStages) func() (bool, error) {
	return func() (bool, error) {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(p.ns), client.MatchingLabels(labels)); err == nil {
			for _, pod := range pods.Items {
				if st.pods[pod.Name] == nil {
					st.pods[pod.Name] = newStages(st.t0)
				}
				st.pods[pod.Name].observe(p, pod.Name, "")
			}
		}
		return p.serving(n)
	}
}

func (st *startStages) String() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(st.pods)) {
		fmt.Fprintf(&b, "\n  %s: %s", name, st.pods[name])
	}
	return b.String()
}

// --- the operator ------------------------------------------------------------------------------

// operatorRun times an n-member EtcdCluster to serving; with n=3 it then times, for a follower and
// for the leader, the return of a deleted member pod and the replacement of a member whose PVC was lost.
func operatorRun(t *testing.T, n int, policy bool, add func(string, time.Duration)) {
	withOperator(t, func(ns string, c *etcdv1alpha1.EtcdCluster) {
		c.Spec.NetworkPolicy.Enabled = &policy
		operatorRunIn(t, ns, c, n, add)
	})
}

func operatorRunIn(t *testing.T, ns string, c *etcdv1alpha1.EtcdCluster, n int, add func(string, time.Duration)) {
	ctx := context.Background()
	waitQuiet(t)

	c.Spec.Replicas = int32(n)
	c.Spec.Storage.Size = resource.MustParse(storageSize)
	t0 := time.Now()
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The client Secret appears with the cluster's CA, before any member serves.
	var tlsCfg *tls.Config
	waitFor(t, "client Secret", timeout, func() (bool, error) {
		var err error
		tlsCfg, err = clusterTLS(c)
		return err == nil, client.IgnoreNotFound(err)
	})
	p := newProber(ns, naming.ClientService(c.Name), naming.Labels(c.Name), tlsCfg)
	defer p.close()
	st := &startStages{t0: t0, pods: map[string]*stages{}}
	add(fmt.Sprintf("time_to_available_%d", n), waitFor(t, fmt.Sprintf("EtcdCluster of %d serving", n), timeout, servingNStaged(p, n, naming.Labels(c.Name), st)).Sub(t0))
	t.Logf("time_to_available_%d stages (created at %s, namespace %s):%s", n, t0.UTC().Format("15:04:05.000"), ns, st)
	saveMemberLogs(t, ns, naming.Labels(c.Name), "available")
	if n != 3 {
		return
	}
	waitFor(t, "EtcdCluster converged", timeout, func() (bool, error) { return converged(c, n) })

	for _, role := range roles {
		waitQuiet(t)
		waitSettled(t, ns, naming.Labels(c.Name))
		name := victim(t, p, role)
		var pod *corev1.Pod
		pod, t0 = deletePod(t, ns, name)
		st := newStages(t0)
		back := waitFor(t, name+" back", timeout, func() (bool, error) {
			st.observe(p, name, pod.UID)
			back := &corev1.Pod{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), back); err != nil || back.UID == pod.UID {
				return false, client.IgnoreNotFound(err)
			}
			return p.serving(n)
		}).Sub(t0)
		add("recovery_pod_deleted_"+role, back)
		add("recovery_pod_deleted_"+role+vsUnprobedSuffix, back)
		add("recovery_pod_deleted_"+role+vsProtectedSuffix, back)
		t.Logf("recovery_pod_deleted_%s stages (%s deleted at %s): %s", role, name, t0.UTC().Format("15:04:05.000"), st)
		saveMemberLogs(t, ns, naming.Labels(c.Name), "recovered-"+role)
		waitFor(t, "EtcdCluster converged", timeout, func() (bool, error) { return converged(c, n) })
	}

	for _, role := range roles {
		waitQuiet(t)
		waitSettled(t, ns, naming.Labels(c.Name))
		lost := victim(t, p, role)
		t0 = time.Now()
		// PVC first: its protection finalizer lets it go only with the pod, so both are gone together.
		if err := k8s.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lost}}); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lost}}); err != nil {
			t.Fatal(err)
		}
		st := newStages(t0)
		before, err := runningPods(ns, naming.Labels(c.Name))
		if err != nil {
			t.Fatal(err)
		}
		add("replace_member_pvc_lost_"+role, waitFor(t, lost+" replaced", timeout, func() (bool, error) {
			if pods, err := runningPods(ns, naming.MemberLabels(c.Name, lost)); err != nil || len(pods) > 0 {
				return false, err
			}
			st.mark("gone")
			if now, err := runningPods(ns, naming.Labels(c.Name)); err == nil {
				for _, pod := range newPods(before, now) {
					st.observe(p, pod.Name, "")
				}
			}
			return p.serving(n)
		}).Sub(t0))
		t.Logf("replace_member_pvc_lost_%s stages (%s lost at %s): %s", role, lost, t0.UTC().Format("15:04:05.000"), st)
		saveMemberLogs(t, ns, naming.Labels(c.Name), "replaced-"+role)
		waitFor(t, "EtcdCluster converged", timeout, func() (bool, error) { return converged(c, n) })
	}
}

// newPods are the pods of now whose names none of before has.
func newPods(before, now []corev1.Pod) []corev1.Pod {
	old := map[string]bool{}
	for _, p := range before {
		old[p.Name] = true
	}
	var out []corev1.Pod
	for _, p := range now {
		if !old[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// converged refreshes c and says whether it has n healthy voting members, is Available and has
// nothing left to do (the definition test/e2e uses).
func converged(c *etcdv1alpha1.EtcdCluster, n int) (bool, error) {
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), c); err != nil {
		return false, err
	}
	s := c.Status
	av := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionAvailable)
	pr := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionProgressing)
	return av != nil && av.Status == metav1.ConditionTrue && pr != nil && pr.Status == metav1.ConditionFalse &&
		int(s.ReadyReplicas) == n && int(s.Replicas) == n && len(s.Members) == n && s.PendingOperation == nil, nil
}

// --- results -----------------------------------------------------------------------------------

type result = framework.BenchResult

// metricDef says how one figure is derived from the samples of a run: the median of metric's
// samples, divided by the median of baseline's; a count without a baseline has ratio = value.
type metricDef struct {
	metric, baseline, unit, notes string
	goal                          *float64
}

func lifecycleMetrics(suffix string) []metricDef {
	g, gReplace := goal, replaceGoal
	serving := "every member pod Ready, answering a linearizable read through its own endpoint (one long-lived client each) and a ready endpoint of the client Service"
	bare := "bare etcd pods written by hand (TLS on both ports, the operator's probes, static --initial-cluster over a headless Service, a client Service, one local-path PVC each)"
	bareAvail := "seconds from creating n " + bare + " until " + serving
	bareRecovery := func(role string) string {
		return "seconds from deleting the " + role + "'s pod of 3 " + bare + " (its PVC kept) and recreating it as soon as its name is free, until " + serving
	}
	var defs []metricDef
	for _, n := range []int{1, 3, 5} {
		defs = append(defs, metricDef{fmt.Sprintf("time_to_available_%d", n), fmt.Sprintf("bare_available_%d", n), "s",
			fmt.Sprintf("EtcdCluster of %d member(s) (TLS, %s) created until %s; baseline: %s, n=%d", n, storageSize, serving, bareAvail, n), &g})
	}
	for _, role := range roles {
		defs = append(defs,
			metricDef{"recovery_pod_deleted_" + role, "bare_recovery_" + role, "s",
				"the " + role + "'s pod of a converged 3-member EtcdCluster deleted until its new pod and the others are back to " + serving + "; baseline: " + bareRecovery(role), &g},
			metricDef{"replace_member_pvc_lost_" + role, "bare_recovery_" + role, "s",
				"PVC and pod of the " + role + " of a converged 3-member EtcdCluster deleted until 3 members (a new one in its place) are back to " + serving + "; baseline: the bare pod restart of the same role (" + bareRecovery(role) + "), as bare etcd has no automatic replacement to compare with", &gReplace})
	}
	// The bar: no slower than the official etcd operator, whose member pods have no probes.
	gPeer := 1.0
	for _, role := range roles {
		defs = append(defs, metricDef{"recovery_pod_deleted_" + role + vsUnprobedSuffix, "bare_recovery_" + role + withoutProbesSuffix, "s",
			"recovery_pod_deleted_" + role + "'s figure; baseline: " + unprobedNote(role, bare, serving) + ", as the official etcd operator's member pods have no probes", &gPeer})
	}
	for i := range defs {
		if suffix != "" {
			defs[i].metric += suffix
			defs[i].notes = "the operator's clusters with spec.networkPolicy.enabled: false (no NetworkPolicy, as the bare baseline has none, so no member waits for its admission): " + defs[i].notes
		}
	}
	if suffix == "" {
		protected := "protected as the operator's members are (a NetworkPolicy: the peer port only from the members, the client and metrics ports from the namespace's pods)"
		waited := " and recreated with an init container (busybox) that waits until a peer's port takes its connections"
		for _, role := range roles {
			defs = append(defs, metricDef{"bare_recovery_" + role + withoutProbesSuffix, "bare_recovery_" + role, "s",
				"what the probes cost a recovery by hand: " + unprobedNote(role, bare, serving) + "; baseline: " + bareRecovery(role), nil},
				metricDef{"bare_recovery_" + role + withPolicySuffix, "bare_recovery_" + role, "s",
					"what the protection costs a recovery by hand without a wait (etcd's first publish from an address the peers do not admit yet is lost): " + bareRecovery(role) + ", the members " + protected + "; baseline: " + bareRecovery(role), nil},
				metricDef{"bare_recovery_" + role + withPolicyAndWaitSuffix, "bare_recovery_" + role, "s",
					"what the protection costs a recovery by hand with a wait: " + bareRecovery(role) + ", the members " + protected + waited + "; baseline: " + bareRecovery(role), nil},
				metricDef{"recovery_pod_deleted_" + role + vsProtectedSuffix, "bare_recovery_" + role + withPolicyAndWaitSuffix, "s",
					"recovery_pod_deleted_" + role + "'s figure (the operator's NetworkPolicy on); baseline: the same protection by hand, " + bareRecovery(role) + ", the members " + protected + waited, &g})
		}
	}
	return defs
}

// unprobedNote describes the bare recovery of role whose recreated pod has no probes.
func unprobedNote(role, bare, serving string) string {
	return "seconds from deleting the " + role + "'s pod of 3 " + bare + " (its PVC kept) and recreating it without any probe as soon as its name is free, until " + serving +
		" (Ready once its container runs; the linearizable read waits for etcd)"
}

// writeResults writes bench/results/<metric>.json for defs, then BENCHMARKS.md from every result
// file there, so that each benchmark can be re-run alone without losing the others' figures.
func writeResults(t *testing.T, defs []metricDef, samples map[string][]float64) {
	date := time.Now().UTC().Format(time.RFC3339)
	// BENCH_METRIC_SUFFIX (e.g. _on_4_nodes) files a run on another cluster shape beside the usual
	// figures instead of over them, so both stay comparable in BENCHMARKS.md.
	suffix, shape := os.Getenv("BENCH_METRIC_SUFFIX"), ""
	if suffix != "" {
		shape = fmt.Sprintf(" (this run: the cluster had %d Ready nodes)", len(fwEnv.ReadyNodes(t)))
	}
	for _, d := range defs {
		if len(samples[d.metric]) == 0 {
			continue // not measured in this run (BENCH_SIZES): its committed result stays
		}
		v := framework.Median(samples[d.metric])
		r := result{Metric: d.metric + suffix, Value: framework.Round2(v), Unit: d.unit, Ratio: framework.Round2(v), Date: date, Command: benchCommand(t),
			Notes: d.notes + shape, Goal: d.goal, Samples: roundAll(samples[d.metric])}
		r.Min, r.Max = bounds(r.Samples)
		if d.baseline != "" {
			b := framework.Median(samples[d.baseline])
			r.Baseline, r.Ratio, r.BaselineSamples = framework.Round2(b), framework.Round2(v/b), roundAll(samples[d.baseline])
			r.BaselineMin, r.BaselineMax = bounds(r.BaselineSamples)
		}
		writeResult(t, r)
	}
	writeMarkdown(t, resultsDir())
}

func resultsDir() string { return filepath.Join("..", "..", "bench", "results") }

// writeResult writes bench/results/<metric>.json.
func writeResult(t *testing.T, r result) {
	t.Helper()
	if err := framework.WriteBenchResult(resultsDir(), r); err != nil {
		t.Fatal(err)
	}
}

func bounds(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = framework.Round2(x)
	}
	return out
}

// writeMarkdown regenerates BENCHMARKS.md's head from every result in dir (test/benchdoc), with this
// machine's description; the sections other benchmarks write stay as they are.
func writeMarkdown(t *testing.T, dir string) {
	kernel, _ := exec.Command("uname", "-r").Output()
	machine := fmt.Sprintf("%d vCPU (`nproc`), %s RAM, kernel `%s`; the single-node local cluster of `hack/cluster`", runtime.NumCPU(), memTotal(), strings.TrimSpace(string(kernel)))
	if err := benchdoc.Write(filepath.Join("..", "..", "BENCHMARKS.md"), dir, machine); err != nil {
		t.Fatal(err)
	}
}

func memTotal() string {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return fmt.Sprintf("%.1f GiB", kb/1024/1024)
		}
	}
	return "?"
}
