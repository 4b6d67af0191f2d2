package etcdcluster

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// The operator's heap per additional EtcdCluster, without a Kubernetes cluster: the whole operator
// of the suite (three reconcilers, the cache of cmd/manager) with scaleHeapFrom and then scaleHeapTo
// 1-member EtcdClusters, as make bench-scale creates them, and the live heap (after GC) of the test
// process at each step. The API clients of the test hold no objects, so what grows is the operator's:
// its cache, its per-cluster memory and etcd client, its queues and metrics. No pod runs in envtest,
// so the etcd client here never connects: the buffers of a connected client are not in this figure
// (docs/dev/benchmarking.md). HEAP_PROFILE_DIR keeps a heap profile at each step; `go tool pprof
// -base from.pb.gz to.pb.gz` shows what the added clusters hold.
func TestOperatorHeapPerCluster(t *testing.T) {
	if os.Getenv("BENCH_HEAP") == "" {
		t.Skip("a measurement, not a check: make bench-heap runs it (BENCH_HEAP=1)")
	}
	const scaleHeapFrom, scaleHeapTo = 10, 50
	profiles := os.Getenv("HEAP_PROFILE_DIR")
	if profiles != "" {
		// Sample every 4 KiB rather than every 512 KiB, so that small per-cluster objects show.
		runtime.MemProfileRate = 4 << 10
	}
	ns := operatortest.NewNamespace(t)
	var fromHeap, toHeap []float64
	var fromStack, toStack, fromG, toG int
	for _, step := range []int{scaleHeapFrom, scaleHeapTo} {
		for i := countClusters(t, ns); i < step; i++ {
			operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
				c.Name = fmt.Sprintf("scale-%d", i)
				c.Spec.Replicas = 1
				c.Spec.Storage.Size = resource.MustParse("256Mi")
			})
		}
		waitSettled(t, ns, step)
		heap, stack, goroutines := liveMemory()
		t.Logf("%d clusters: heap %.2f MiB (samples %v), stacks %.2f MiB, %d goroutines", step, slices.Min(heap), heap, mib(int64(stack)), goroutines)
		if profiles != "" {
			writeHeapProfile(t, filepath.Join(profiles, fmt.Sprintf("heap-%d.pb.gz", step)))
		}
		if step == scaleHeapFrom {
			fromHeap, fromStack, fromG = heap, stack, goroutines
		} else {
			toHeap, toStack, toG = heap, stack, goroutines
		}
	}
	added := float64(scaleHeapTo - scaleHeapFrom)
	perCluster := (slices.Min(toHeap) - slices.Min(fromHeap)) / added
	stackPerCluster := mib(int64(toStack-fromStack)) / added
	t.Logf("per additional cluster: heap %.0f KiB, stacks %.0f KiB, %.1f goroutines",
		perCluster*1024, stackPerCluster*1024, float64(toG-fromG)/added)
	if perCluster <= 0 {
		t.Fatalf("the heap did not grow with %d more clusters (%.2f → %.2f MiB): the measurement is broken", int(added), slices.Min(fromHeap), slices.Min(toHeap))
	}
	if dir := os.Getenv("BENCH_RESULTS"); dir != "" && !t.Failed() {
		r := heapPerClusterResult(perCluster, stackPerCluster, fromHeap, toHeap, scaleHeapFrom, scaleHeapTo, time.Now())
		if err := framework.WriteBenchResult(dir, r); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s in %s", r.Metric, dir)
	}
}

// heapPerClusterResult is the figure of TestOperatorHeapPerCluster as a bench result: KiB of heap
// per additional cluster, a count (no same-run baseline), with the heap of both steps in its notes.
func heapPerClusterResult(perCluster, stackPerCluster float64, from, to []float64, n, m int, now time.Time) framework.BenchResult {
	kib := math.Round(perCluster * 1024)
	return framework.BenchResult{Metric: "operator_heap_kib_per_cluster", Value: kib, Unit: "KiB", Ratio: kib,
		Date: now.UTC().Format(time.RFC3339), Samples: []float64{kib}, Min: kib, Max: kib,
		Command: "make bench-heap (BENCH_HEAP=1 BENCH_RESULTS=bench/results go test ./internal/controller/etcdcluster/ -run '^TestOperatorHeapPerCluster$' -count=1 -v)",
		Notes: fmt.Sprintf("Go heap (HeapAlloc after runtime.GC, least of 5 samples a second apart) the whole operator holds per additional 1-member EtcdCluster (256Mi, TLS on), "+
			"from %d clusters (%.2f MiB; samples %v) to %d (%.2f MiB; samples %v), on envtest: a real kube-apiserver where no pod runs, so no etcd client connects. "+
			"Not included: goroutine stacks (%.0f KiB per cluster here) and a connected etcd client (TestClientMemoryPerCluster: ~34 KiB heap, ~17 KiB stacks, 6 goroutines with TLS). "+
			"RSS grows by about twice the heap with GOGC=100 (docs/dev/benchmarking.md); a count", n, slices.Min(from), from, m, slices.Min(to), to, stackPerCluster*1024)}
}

// countClusters is how many EtcdClusters ns holds.
func countClusters(t *testing.T, ns string) int {
	t.Helper()
	list := &etcdv1alpha1.EtcdClusterList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// waitSettled waits until the operator has made the member pod of each of the n clusters of ns and
// recorded a phase for each, then for its passes to quiet down (no pod runs, so every pass ends
// waiting for etcd).
func waitSettled(t *testing.T, ns string, n int) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pods, clusters := &corev1.PodList{}, &etcdv1alpha1.EtcdClusterList{}
		err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{naming.LabelManagedBy: naming.ManagedBy})
		if err == nil {
			err = k8s.List(ctx, clusters, client.InNamespace(ns))
		}
		if err != nil {
			t.Fatal(err)
		}
		phased := 0
		for _, c := range clusters.Items {
			if c.Status.Phase != "" {
				phased++
			}
		}
		if len(pods.Items) >= n && phased >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 minutes: %d member pods and %d clusters with a phase, want %d", len(pods.Items), phased, n)
		}
		time.Sleep(time.Second)
	}
	time.Sleep(10 * time.Second)
}

// liveMemory samples the live heap five times, a second apart (in MiB), with the goroutine stacks
// and goroutine count of the last sample. Without etcd every cluster's passes keep retrying, so each
// sample also holds what the passes under way hold at that instant; the least of the samples is the
// closest to what stays.
func liveMemory() (heap []float64, stack, goroutines int) {
	for i := range 5 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		heap = append(heap, round2(mib(int64(heapAlloc()))))
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return heap, int(m.StackInuse), runtime.NumGoroutine()
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func writeHeapProfile(t *testing.T, path string) {
	t.Helper()
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap profile: %s", path)
}
