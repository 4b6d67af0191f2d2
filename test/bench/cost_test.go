//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// costClusters is how many healthy clusters one operator watches while its steady-state cost is measured.
const costClusters = 10

// costWindow is how long each steady-state window lasts: long enough for several idle re-observations
// (every 30 s) of every cluster.
const costWindow = 2 * time.Minute

// TestBenchOperatorCost measures what a converged fleet costs the operator at steady state: API writes
// per minute (from the process's own client-go request counter) while every cluster takes writes, and
// CPU per idle cluster (from /proc, user + system time) while nothing happens. Goal for writes: none —
// a healthy cluster under load changes nothing the operator records.
func TestBenchOperatorCost(t *testing.T) {
	ns, cleanup := newNamespace(t)
	defer cleanup()
	addr := loopback.FreeAddr(t)
	op := startOperator(t, ns, "--metrics-bind-address="+addr, "--metrics-secure=false")
	defer op.stop()
	ctx := context.Background()
	waitQuiet(t)

	var clusters []*etcdv1alpha1.EtcdCluster
	for i := 0; i < costClusters; i++ {
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cost-%d", i), Namespace: ns}}
		c.Spec.Replicas = 1
		c.Spec.Storage.Size = resource.MustParse(storageSize)
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, c)
	}
	defer deleteClusters(t, ns, clusters, 2*time.Minute)
	for _, c := range clusters {
		waitFor(t, c.Name+" converged", 2*timeout, func() (bool, error) { return converged(c, 1) })
	}
	time.Sleep(30 * time.Second) // the last status writes of the bring-up settle

	pid := op.cmd.Process.Pid
	cpu0, writes0 := cpuSeconds(t, pid), apiWrites(t, addr)
	time.Sleep(costWindow)
	idleCPU := cpuSeconds(t, pid) - cpu0
	idleWrites := apiWrites(t, addr) - writes0

	var writers []*framework.Writer
	for _, c := range clusters {
		tlsCfg, err := clusterTLS(c)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := runningPods(ns, naming.Labels(c.Name))
		if err != nil || len(pods) != 1 {
			t.Fatalf("pods of %s: %d %v", c.Name, len(pods), err)
		}
		cl, err := clientv3.New(clientv3.Config{Endpoints: []string{naming.EndpointForIP(pods[0].Status.PodIP, true)}, TLS: tlsCfg, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cl.Close() }()
		writers = append(writers, framework.StartWriter(cl, "/cost/"))
	}
	writes1 := apiWrites(t, addr)
	time.Sleep(costWindow)
	loadWrites := apiWrites(t, addr) - writes1
	puts := 0
	for _, w := range writers {
		acked, _ := w.Finish()
		puts += len(acked)
	}
	rss := rssMiB(t, pid)
	minutes := costWindow.Minutes()
	t.Logf("idle: %.0f API writes, %.2f CPU s; under load (%d puts): %.0f API writes; RSS %.1f MiB", idleWrites, idleCPU, puts, loadWrites, rss)

	cmd := benchCommand(t)
	date := time.Now().UTC().Format(time.RFC3339)
	writeCount := func(metric string, v float64, unit, notes string, goal *float64) {
		writeResult(t, result{Metric: metric, Value: framework.Round2(v), Unit: unit, Ratio: framework.Round2(v), Date: date, Command: cmd,
			Notes: notes, Goal: goal, Samples: []float64{framework.Round2(v)}, Min: framework.Round2(v), Max: framework.Round2(v)})
	}
	zero, milli := 0.0, 1.0
	writeCount("operator_api_writes_per_minute_10_clusters", loadWrites/minutes, "writes/min",
		fmt.Sprintf("API writes (POST, PUT, PATCH, DELETE counted by the operator's client-go rest_client_requests_total) per minute over %s while %d converged 1-member EtcdClusters each took a sequential writer (%d puts in all); idle over the %s before: %.0f writes; a count", costWindow, costClusters, puts, costWindow, idleWrites), &zero)
	writeCount("operator_cpu_millicores_per_idle_cluster", idleCPU/costWindow.Seconds()*1000/costClusters, "millicores",
		fmt.Sprintf("the operator process's user+system CPU (/proc/<pid>/stat) over %s with %d converged, idle 1-member EtcdClusters, divided by the cluster count; a count", costWindow, costClusters), &milli)
	writeCount("operator_rss_mib_10_clusters", rss, "MiB", fmt.Sprintf("the operator process's resident memory (VmRSS) after both windows with %d EtcdClusters; a count", costClusters), nil)
	writeMarkdown(t, resultsDir())
}

// deleteClusters deletes the EtcdClusters (while their operator still runs, or their finalizers would
// hold the namespace) and waits until none is left in ns.
func deleteClusters(t *testing.T, ns string, clusters []*etcdv1alpha1.EtcdCluster, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, c := range clusters {
		_ = k8s.Delete(ctx, c)
	}
	waitFor(t, "EtcdClusters deleted", within, func() (bool, error) {
		list := &etcdv1alpha1.EtcdClusterList{}
		err := k8s.List(ctx, list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
}

// apiWrites is the operator's count of mutating API requests so far, from its metrics endpoint.
func apiWrites(t *testing.T, addr string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	total, seen := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		seen = true
		for _, m := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(line, m) {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				if err != nil {
					t.Fatalf("metric line %q: %v", line, err)
				}
				total += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !seen { // a count of zero must come from the counter, not from its absence
		t.Fatal("no rest_client_requests_total in the operator's metrics")
	}
	return total
}

// cpuSeconds is the user+system CPU time of process pid so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start at state: utime and stime are
	// fields 14 and 15 of the whole line, so 12 and 13 after it.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
