//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// unrelatedObjects is how many Secrets and ConfigMaps that are none of the operator's business share
// the watched namespace: a cache that hoarded them would show in the RSS.
const unrelatedObjects = 1000

// scaleStep is what one point of the scale curve measured.
type scaleStep struct {
	n                                   int
	createSeconds                       float64 // from the first create of the step until all n are converged
	createPeakRSS, createMillicores     float64
	createWritesPerMin                  float64
	steadyRSS, steadyMillicores         float64
	steadyWritesPerMin, reconcileP99Sec float64
}

// TestBenchScale grows one operator's fleet of 1-member EtcdClusters (on local-path volumes, as the
// lifecycle figures) through SCALE_STEPS (default 10,50,100), beside
// unrelatedObjects Secrets and ConfigMaps, and records at each step the operator's RSS, CPU, API writes per
// minute and reconcile latency, first while creating and then at steady state.
func TestBenchScale(t *testing.T) {
	steps := intsFromEnv(t, "SCALE_STEPS", []int{10, 50, 100})
	ns, cleanup := newNamespace(t)
	defer cleanup()
	ctx := context.Background()
	for i := 0; i < unrelatedObjects; i++ {
		data := map[string]string{"payload": strings.Repeat("x", 1024)}
		if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i), Namespace: ns}, StringData: data}); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i), Namespace: ns}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	addr := loopback.FreeAddr(t)
	op := startOperator(t, ns, "--metrics-bind-address="+addr, "--metrics-secure=false")
	defer op.stop()
	pid := op.cmd.Process.Pid
	waitQuiet(t)

	var clusters []*etcdv1alpha1.EtcdCluster
	defer func() { deleteClusters(t, ns, clusters, 10*time.Minute) }()
	var results []scaleStep
	for _, n := range steps {
		s := scaleStep{n: n}
		sampler := startSampler(pid)
		cpu0, w0, t0 := cpuSeconds(t, pid), apiWrites(t, addr), time.Now()
		for i := len(clusters); i < n; i++ {
			c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d", i), Namespace: ns}}
			c.Spec.Replicas = 1
			// Not storage.medium Memory: etcd preallocates 64 MiB WAL segments, which a tmpfs of the
			// 64Mi minimum cannot hold beside the database (a member died with ENOSPC at start), and
			// a tmpfs large enough costs every member >128 MiB of the machine's RAM.
			c.Spec.Storage.Size = resource.MustParse(storageSize)
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			clusters = append(clusters, c)
		}
		for _, c := range clusters {
			waitFor(t, c.Name+" converged", 20*time.Minute, func() (bool, error) { return converged(c, 1) })
		}
		took := time.Since(t0)
		s.createSeconds = took.Seconds()
		s.createPeakRSS = sampler.stop()
		s.createMillicores = (cpuSeconds(t, pid) - cpu0) / took.Seconds() * 1000
		s.createWritesPerMin = (apiWrites(t, addr) - w0) / took.Minutes()

		time.Sleep(30 * time.Second) // the bring-up's last status writes settle
		h0 := reconcileHistogram(t, addr)
		cpu0, w0 = cpuSeconds(t, pid), apiWrites(t, addr)
		time.Sleep(costWindow)
		s.steadyMillicores = (cpuSeconds(t, pid) - cpu0) / costWindow.Seconds() * 1000
		s.steadyWritesPerMin = (apiWrites(t, addr) - w0) / costWindow.Minutes()
		s.steadyRSS = rssMiB(t, pid)
		s.reconcileP99Sec = histogramQuantile(0.99, reconcileHistogram(t, addr), h0)
		t.Logf("N=%d: created in %.0f s (peak RSS %.1f MiB, %.0f m CPU, %.0f writes/min); steady: RSS %.1f MiB, %.1f m CPU, %.1f writes/min, reconcile p99 %.3f s",
			n, s.createSeconds, s.createPeakRSS, s.createMillicores, s.createWritesPerMin, s.steadyRSS, s.steadyMillicores, s.steadyWritesPerMin, s.reconcileP99Sec)
		results = append(results, s)
		writeScaleResults(t, results) // after every step: a run cut short keeps the steps it measured
	}
}

// sampler records the peak RSS of a process, sampled every 500 ms.
type sampler struct {
	peak float64
	quit chan struct{}
	done chan struct{}
}

func startSampler(pid int) *sampler {
	s := &sampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(raw), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
						kb, _ := strconv.ParseFloat(f[1], 64)
						s.peak = math.Max(s.peak, kb/1024)
					}
				}
			}
			select {
			case <-s.quit:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) stop() float64 {
	close(s.quit)
	<-s.done
	return s.peak
}

// reconcileHistogram is the EtcdCluster controller's cumulative reconcile-time histogram: bucket upper
// bound → count.
func reconcileHistogram(t *testing.T, addr string) map[float64]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "controller_runtime_reconcile_time_seconds_bucket{") || !strings.Contains(strings.ToLower(line), `controller="etcdcluster"`) {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.Index(line[i+4:], `"`)
		le, err := strconv.ParseFloat(line[i+4:i+4+j], 64)
		if err != nil {
			le = math.Inf(1)
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		out[le] = v
	}
	if len(out) == 0 {
		t.Fatal(`no controller_runtime_reconcile_time_seconds_bucket{controller="etcdcluster"} in the operator's metrics`)
	}
	return out
}

// histogramQuantile is the upper bound of the bucket holding quantile q of the observations made
// between two cumulative snapshots (as Prometheus' histogram_quantile, without interpolation).
func histogramQuantile(q float64, now, before map[float64]float64) float64 {
	var les []float64
	for le := range now {
		les = append(les, le)
	}
	sort.Float64s(les)
	total := now[math.Inf(1)] - before[math.Inf(1)]
	if total == 0 {
		return 0
	}
	for _, le := range les {
		if now[le]-before[le] >= q*total {
			return le
		}
	}
	return math.Inf(1)
}

func writeScaleResults(t *testing.T, steps []scaleStep) {
	cmd := framework.BenchCommand([]string{"SCALE_STEPS"}, "make bench-scale")
	date := time.Now().UTC().Format(time.RFC3339)
	rssGoal, p99Goal, cpuGoal := 128.0, 1.0, 1.0
	for _, s := range steps {
		count := func(metric string, v float64, unit, notes string, goal *float64) {
			writeResult(t, result{Metric: fmt.Sprintf("%s_%d", metric, s.n), Value: framework.Round2(v), Unit: unit, Ratio: framework.Round2(v), Date: date,
				Command: cmd, Notes: notes, Goal: goal, Samples: []float64{framework.Round2(v)}, Min: framework.Round2(v), Max: framework.Round2(v)})
		}
		fleet := fmt.Sprintf("%d converged 1-member EtcdClusters (local-path, %s) and %d unrelated Secrets and ConfigMaps in the watched namespace", s.n, storageSize, unrelatedObjects)
		count("scale_operator_rss_mib", s.steadyRSS, "MiB", "the operator's RSS at steady state with "+fmt.Sprint(fleet)+"; a count", &rssGoal)
		count("scale_reconcile_p99_seconds", s.reconcileP99Sec, "s", fmt.Sprintf("p99 of the EtcdCluster controller's reconcile time (bucket upper bound) over %s at steady state with %s; a count", costWindow, fleet), &p99Goal)
		count("scale_operator_cpu_millicores_per_cluster", s.steadyMillicores/float64(s.n), "millicores", fmt.Sprintf("the operator's CPU over %s at steady state with %s, divided by the cluster count; a count", costWindow, fleet), &cpuGoal)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Scale (`make bench-scale`)\n\n")
	fmt.Fprintf(&b, "One operator, one watched namespace holding %d unrelated Secrets and %d ConfigMaps, and N 1-member EtcdClusters (local-path volumes, %s), grown step by step on the local cluster; %s. Goals: RSS < 128 MiB and reconcile p99 < 1 s at N=100, < 1 millicore per idle cluster.\n\n", unrelatedObjects, unrelatedObjects, storageSize, date[:10])
	b.WriteString("| N | create: time to all converged | create: peak RSS | create: CPU | create: API writes/min | steady: RSS | steady: CPU | steady: API writes/min | steady: reconcile p99 |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "| %d | %.0f s | %.1f MiB | %.0f m | %.0f | %.1f MiB | %.1f m | %.1f | %.3f s |\n", s.n, s.createSeconds, s.createPeakRSS, s.createMillicores,
			s.createWritesPerMin, s.steadyRSS, s.steadyMillicores, s.steadyWritesPerMin, s.reconcileP99Sec)
	}
	b.WriteString("\nCPU is the operator process's user+system time (/proc) over the phase; API writes are its client-go POST/PUT/PATCH/DELETE requests; reconcile p99 is the upper bound of the histogram bucket holding the 99th percentile.\n")
	if err := framework.WriteBenchmarksSection("../../BENCHMARKS.md", "scale", b.String()); err != nil {
		t.Fatal(err)
	}
	writeMarkdown(t, resultsDir())
}
