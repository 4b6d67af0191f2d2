package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
)

// What the operator's long-lived client of one cluster costs it, connected with TLS to a real etcd
// in a process of its own (bin/etcd; an embedded member would add its server side of each
// connection to the same heap): live heap, goroutine stacks and goroutines per client, each client
// having listed members and read a status, as a pass does. The figure complements
// TestOperatorHeapPerCluster (internal/controller/etcdcluster), where no member answers
// (docs/dev/benchmarking.md).
func TestClientMemoryPerCluster(t *testing.T) {
	if os.Getenv("BENCH_HEAP") == "" {
		t.Skip("a measurement, not a check: make bench-heap runs it (BENCH_HEAP=1)")
	}
	const clients = 20
	// One metrics URL per client stands for the metrics endpoint of each cluster's member: the
	// operator reads every member's disk latency every slowWindow.
	var metricsURLs []string
	for range clients {
		metricsURLs = append(metricsURLs, "http://"+loopback.FreeAddr(t))
	}
	clientURL, tlsConfig := startTLSEtcd(t, "--listen-metrics-urls="+strings.Join(metricsURLs, ","))
	dial := func() *Client {
		c, err := New([]string{clientURL}, tlsConfig)
		if err != nil {
			t.Fatal(err)
		}
		callAsAPass(t, c, clientURL)
		return c
	}
	_ = dial().Close() // etcd is up; the first dial's one-time allocations stay out of the figure

	heap0, stack0, g0 := liveMemory()
	var open []*Client
	for range clients {
		open = append(open, dial())
	}
	time.Sleep(time.Second) // the connections settle (keepalive goroutines, idle buffers)
	heap1, stack1, g1 := liveMemory()
	runtime.KeepAlive(open)
	for _, c := range open {
		_ = c.Close()
	}
	t.Logf("per long-lived TLS client: heap %.1f KiB, stacks %.1f KiB, %.1f goroutines",
		float64(heap1-heap0)/clients/1024, float64(stack1-stack0)/clients/1024, float64(g1-g0)/clients)

	time.Sleep(time.Second) // the closed clients' goroutines end
	heap1, stack1, g1 = liveMemory()
	for _, u := range metricsURLs {
		if _, err := ReadDiskLatency(context.Background(), u+"/metrics"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	heap2, stack2, g2 := liveMemory()
	t.Logf("per member whose metrics were read: heap %.1f KiB, stacks %.1f KiB, %.1f goroutines",
		float64(heap2-heap1)/clients/1024, float64(stack2-stack1)/clients/1024, float64(g2-g1)/clients)
}

// liveMemory is the live heap after a GC, the goroutine stacks and the goroutine count.
func liveMemory() (heap, stack int64, goroutines int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc), int64(m.StackInuse), runtime.NumGoroutine()
}

// What dialling anew at each pass costs instead (the operator closes an idle cluster's client after its
// pass): the operator's CPU and allocations for dial, member list, status and close, against the same
// two calls on a kept client. CPU is the test process's own (getrusage), so etcd's side is not in it.
func TestClientDialCost(t *testing.T) {
	if os.Getenv("BENCH_HEAP") == "" {
		t.Skip("a measurement, not a check: make bench-heap runs it (BENCH_HEAP=1)")
	}
	const cycles = 200
	clientURL, tlsConfig := startTLSEtcd(t)
	measure := func(what string, cycle func()) {
		cycle() // one-time allocations stay out of the figure
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		cpu0 := processCPU(t)
		for range cycles {
			cycle()
		}
		cpu := processCPU(t) - cpu0
		runtime.ReadMemStats(&m1)
		t.Logf("%s: %.2f ms CPU, %.0f KiB allocated per pass", what, float64(cpu)/cycles/1e6, float64(m1.TotalAlloc-m0.TotalAlloc)/cycles/1024)
	}
	measure("dialled anew", func() {
		c, err := New([]string{clientURL}, tlsConfig)
		if err != nil {
			t.Fatal(err)
		}
		callAsAPass(t, c, clientURL)
		_ = c.Close()
	})
	kept, err := New([]string{clientURL}, tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kept.Close() }()
	measure("kept", func() { callAsAPass(t, kept, clientURL) })
}

// startTLSEtcd runs bin/etcd (envtest's assets, or ETCD_BIN) with client TLS in a process of its own
// and returns its client URL and a client TLS configuration the operator would use.
func startTLSEtcd(t *testing.T, extraArgs ...string) (string, *tls.Config) {
	t.Helper()
	bin := filepath.Join("..", "..", "bin", "etcd")
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		bin = filepath.Join(dir, "etcd")
	}
	if b := os.Getenv("ETCD_BIN"); b != "" {
		bin = b
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no etcd binary (%v): run `make envtest-assets`, or set ETCD_BIN", err)
	}
	now := time.Now()
	ca, caData, server := testCA(t, now)
	dir := t.TempDir()
	for name, data := range server {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clientURL, peerURL := "https://"+loopback.FreeAddr(t), "http://"+loopback.FreeAddr(t)
	etcd := exec.Command(bin, append([]string{"--name=m0", "--data-dir=" + filepath.Join(dir, "data"),
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL, "--initial-cluster=m0=" + peerURL,
		"--cert-file=" + filepath.Join(dir, pki.CertKey), "--key-file=" + filepath.Join(dir, pki.PrivKeyKey),
		"--trusted-ca-file=" + filepath.Join(dir, pki.CACertKey), "--client-cert-auth", "--log-level=error"}, extraArgs...)...)
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Process.Kill(); _ = etcd.Wait() })

	clientData, err := ca.Issue("operator", nil, nil, pki.ClientOnly, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(clientData[pki.CertKey], clientData[pki.PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caData[pki.CACertKey])
	return clientURL, TLSConfig(pair, roots, "demo-client.ns.svc")
}

// callAsAPass lists members (waiting for etcd to answer) and reads the member's status, as a pass does.
func callAsAPass(t *testing.T, c *Client, endpoint string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := c.MemberList(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("etcd does not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := c.Status(ctx, endpoint); err != nil {
		t.Fatal(err)
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
