// Package localetcd runs 3-member etcd clusters on loopback as separate processes of the etcd binary
// the project builds (bin/etcd), with the arguments the operator gives its members
// (resources.MemberPod), for the benchmarks that need no Kubernetes cluster (test/bench/consistency,
// test/bench/pitr); and the small figure helpers they share.
package localetcd

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// Binary is the etcd binary: $ETCD_BIN, or bin/etcd under repoRoot.
func Binary(t testing.TB, repoRoot string) string {
	t.Helper()
	bin := os.Getenv("ETCD_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot, "bin", "etcd")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("etcd binary: %v (run `make envtest-assets`, or set ETCD_BIN)", err)
	}
	return bin
}

// Member is one etcd process of a Cluster.
type Member struct {
	Name, Client, Peer, Metrics, Dir, LogPath string
	args                                      []string
	cmd                                       *exec.Cmd
	exited                                    chan struct{}
}

// DataDir is the member's data directory.
func (m *Member) DataDir() string { return filepath.Join(m.Dir, "data") }

// Pid is the member's process ID (0 when not started).
func (m *Member) Pid() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Cluster is 3 members, and clients of all of them once started.
type Cluster struct {
	Name    string
	Members []*Member
	Client  *clientv3.Client
	EC      *etcdclient.Client
	bin     string
}

// NewCluster lays out 3 members with the arguments MemberPod gives an operator's member (TLS off,
// addresses and data directory on this machine), with or without etcd's consistency checks.
func NewCluster(t testing.TB, bin, name string, checks bool) *Cluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", UID: types.UID("bench-" + name)}}
	c.Spec = etcdv1alpha1.EtcdClusterSpec{
		Replicas: 3, Version: versions.Default,
		Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("8Gi")},
		TLS:     etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled},
		Etcd: etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: etcdv1alpha1.DefaultSnapshotCount,
			AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"},
	}
	cl := &Cluster{Name: name, bin: bin}
	var names, initial []string
	for i := 0; i < 3; i++ {
		m := &Member{Name: fmt.Sprintf("%s-%d", name, i), Client: "http://" + loopback.FreeAddr(t), Peer: "http://" + loopback.FreeAddr(t),
			Metrics: "http://" + loopback.FreeAddr(t), Dir: t.TempDir()}
		m.LogPath = filepath.Join(m.Dir, "etcd.log")
		cl.Members = append(cl.Members, m)
		names = append(names, m.Name)
		initial = append(initial, m.Name+"="+m.Peer)
	}
	drop := map[string]bool{}
	if !checks {
		for _, a := range resources.ConsistencyArgs(versions.Default) {
			flag, _, _ := strings.Cut(a, "=")
			drop[flag] = true
		}
	}
	for _, m := range cl.Members {
		pod := resources.MemberPod(c, resources.MemberPodInput{Member: m.Name, Image: "i", Version: versions.Default, InitialCluster: names, Bootstrap: true})
		local := map[string]string{
			"--data-dir": m.DataDir(), "--listen-client-urls": m.Client, "--advertise-client-urls": m.Client,
			"--listen-peer-urls": m.Peer, "--initial-advertise-peer-urls": m.Peer, "--initial-cluster": strings.Join(initial, ","),
			"--listen-metrics-urls": m.Metrics,
		}
		for _, a := range pod.Spec.Containers[0].Args {
			flag, _, _ := strings.Cut(a, "=")
			if drop[flag] {
				continue
			}
			if v, ok := local[flag]; ok {
				a = flag + "=" + v
			}
			m.args = append(m.args, a)
		}
	}
	return cl
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var endpoints []string
	for _, m := range c.Members {
		endpoints = append(endpoints, m.Client)
	}
	return endpoints
}

// Start starts every member at once (on existing data after the first time) and waits until all
// are healthy; checkInterval, when not 0, replaces the interval of etcd's periodic check.
func (c *Cluster) Start(t testing.TB, checkInterval time.Duration) {
	t.Helper()
	for _, m := range c.Members {
		args := slices.Clone(m.args)
		for i, a := range args {
			if checkInterval != 0 && strings.HasPrefix(a, "--corrupt-check-time=") {
				args[i] = "--corrupt-check-time=" + checkInterval.String()
			}
		}
		log, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		m.cmd = exec.Command(c.bin, args...)
		m.cmd.Stdout, m.cmd.Stderr = log, log
		if err := m.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", m.Name, err)
		}
		m.exited = make(chan struct{})
		go func(cmd *exec.Cmd, exited chan struct{}) {
			_ = cmd.Wait()
			_ = log.Close()
			close(exited)
		}(m.cmd, m.exited)
	}
	t.Cleanup(func() { c.Stop(t) })
	deadline := time.Now().Add(time.Minute)
	for _, m := range c.Members {
		for !Healthy(m.Metrics) {
			select {
			case <-m.exited:
				t.Fatalf("%s exited; log in %s", m.Name, m.LogPath)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not healthy after a minute; log in %s", m.Name, m.LogPath)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var err error
	if c.Client, err = clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		t.Fatal(err)
	}
	if c.EC, err = etcdclient.New(c.Endpoints(), nil); err != nil {
		t.Fatal(err)
	}
}

// Healthy says whether the member serving metrics answers /health with 200.
func Healthy(metrics string) bool {
	resp, err := http.Get(metrics + "/health")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop stops every member at once (SIGTERM, as the kubelet does) and waits for them.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	c.signal(syscall.SIGTERM, 30*time.Second)
}

// Kill kills every member at once (SIGKILL: a node lost) and waits for them.
func (c *Cluster) Kill() {
	c.signal(syscall.SIGKILL, 30*time.Second)
}

func (c *Cluster) signal(sig syscall.Signal, grace time.Duration) {
	for _, m := range c.Members {
		if m.cmd != nil && m.cmd.Process != nil {
			_ = m.cmd.Process.Signal(sig)
		}
	}
	if c.Client != nil {
		_ = c.Client.Close()
		_ = c.EC.Close()
		c.Client, c.EC = nil, nil
	}
	for _, m := range c.Members {
		if m.exited == nil {
			continue
		}
		select {
		case <-m.exited:
		case <-time.After(grace):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
	}
}

// --- figures -------------------------------------------------------------------------------------

// EnvInt is the positive integer in $name, or def.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// EnvDuration is the positive duration in $name, or def.
func EnvDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return d
}

// Quantile is the q-quantile of ds (nearest rank).
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// RoundAll is xs with two decimals each.
func RoundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = framework.Round2(x)
	}
	return out
}

// Bounds are the smallest and the largest of xs (0, 0 for none).
func Bounds(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}

// LoadAvg is the machine's 1-minute load average: the benchmarks share its cores.
func LoadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(raw))[0]
}

// Peak is a process's peak resident memory in MiB (VmHWM), and the largest file-backed and
// anonymous parts of it seen (RssFile, RssAnon).
type Peak struct{ RSS, File, Anon float64 }

// RunPeak runs cmd to its end and reads its peak memory from /proc every 10 ms meanwhile; its
// output is in the error when it fails. Not the child's getrusage maxrss: Linux carries the peak of
// the process that forked it (this test process, larger than most children) over into it at exec.
func RunPeak(cmd *exec.Cmd) (Peak, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return Peak{}, err
	}
	done := make(chan struct{})
	var peak Peak
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			raw, err := os.ReadFile(path)
			if err != nil { // reaped
				return
			}
			for _, line := range strings.Split(string(raw), "\n") {
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				kib, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					continue
				}
				switch f[0] {
				case "VmHWM:":
					peak.RSS = max(peak.RSS, kib/1024)
				case "RssFile:":
					peak.File = max(peak.File, kib/1024)
				case "RssAnon:":
					peak.Anon = max(peak.Anon, kib/1024)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	err := cmd.Wait()
	<-done
	if err != nil {
		return peak, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out.String())
	}
	return peak, nil
}
