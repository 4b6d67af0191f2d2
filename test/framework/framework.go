// Package framework runs the operator against the real local cluster (hack/cluster) for the e2e
// tests and the benchmarks: each test gets its own namespace and its own operator process on the
// host (WATCH_NAMESPACE scoped), so a test can kill the operator at a failpoint and start it again.
// The host reaches pod IPs directly, as the operator does.
package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
)

// Env is a connection to the local cluster and a freshly built manager binary.
type Env struct {
	K8s client.Client
	// Config is K8s's REST configuration, for the clients controller-runtime's does not cover (pod logs).
	Config     *rest.Config
	Kubeconfig string
	ManagerBin string
	dir        string
	root       string
}

// Connect connects to the cluster of $KUBECONFIG and changes nothing on it: for suites whose
// CRDs come from an installer (OLM v1 refuses CRDs it did not create). repoRoot is the path of the
// repository root from the calling test's directory.
func Connect(repoRoot string) (*Env, error) {
	e := &Env{Kubeconfig: os.Getenv("KUBECONFIG"), root: repoRoot}
	if e.Kubeconfig == "" {
		return nil, fmt.Errorf("KUBECONFIG must point at the local cluster (make cluster-up; source .cluster/env.sh)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// The suites' clocks poll every 200 ms with a few requests each; client-go's default limit of 5
	// requests a second (burst 10) stretched a poll to 0.4–0.8 s, and more for the loop that asks more,
	// so that a benchmark's two sides were timed at different resolutions.
	cfg.QPS, cfg.Burst = 100, 200
	e.Config = cfg
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1alpha1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	if e.K8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	return e, nil
}

// Setup connects to the cluster of $KUBECONFIG, installs the CRDs of this tree and builds the
// manager. repoRoot is the path of the repository root from the calling test's directory.
func Setup(repoRoot string) (*Env, error) {
	e, err := Connect(repoRoot)
	if err != nil {
		return nil, err
	}
	install := exec.Command("kubectl", "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(repoRoot, "config", "crd"))
	install.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("install CRDs: %w\n%s", err, out)
	}
	if e.dir, err = os.MkdirTemp("", "etcd-autopilot-manager"); err != nil {
		return nil, err
	}
	e.ManagerBin = filepath.Join(e.dir, "manager")
	build := exec.Command("go", "build", "-o", e.ManagerBin, managerPackage(repoRoot))
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build manager: %w", err)
	}
	return e, nil
}

// managerPackage is the manager's main package in the source tree at root: cmd/manager since the
// go/v4 layout, the root directory in releases before it.
func managerPackage(root string) string {
	if _, err := os.Stat(filepath.Join(root, "cmd", "manager", "main.go")); err == nil {
		return filepath.Join(root, "cmd", "manager")
	}
	return root
}

// Close removes the manager binary.
func (e *Env) Close() { _ = os.RemoveAll(e.dir) }

// BuildManagerAt builds the manager of an earlier commit of this repository (a previous release),
// from the repository's own history.
func (e *Env) BuildManagerAt(repoRoot, commit string) (string, error) {
	src := filepath.Join(e.dir, "src-"+commit)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	extract := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive --format=tar %s | tar -x -C %q", repoRoot, commit, src))
	if out, err := extract.CombinedOutput(); err != nil {
		return "", fmt.Errorf("extract %s: %w\n%s", commit, err, out)
	}
	bin := filepath.Join(e.dir, "manager-"+commit)
	build := exec.Command("go", "build", "-o", bin, managerPackage(src))
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build manager at %s: %w\n%s", commit, err, out)
	}
	return bin, nil
}

// Operator is a manager process on the host, scoped to one namespace.
type Operator struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	logs *bytes.Buffer
	mu   *sync.Mutex
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// StartOperator runs the manager for namespace ns, with failpoints armed (comma list, may be empty)
// and extra environment variables (NAME=value).
func (e *Env) StartOperator(t *testing.T, ns, failpoints string, extraEnv ...string) *Operator {
	t.Helper()
	return e.StartOperatorBinary(t, e.ManagerBin, ns, append(extraEnv, "ETCD_AUTOPILOT_FAILPOINTS="+failpoints)...)
}

// StartOperatorBinary runs manager binary bin (e.g. an earlier release) for namespace ns.
func (e *Env) StartOperatorBinary(t *testing.T, bin, ns string, extraEnv ...string) *Operator {
	t.Helper()
	return e.startOperator(t, bin, ns, nil, extraEnv)
}

// StartOperatorServingMetrics runs the manager for namespace ns with its metrics served in plain HTTP
// on addr (a loopback host:port, see loopback.FreeAddr), for a Prometheus the test runs on the host.
// The shipped ServiceMonitor scrapes the operator over HTTPS with a ServiceAccount token instead; what
// is served is the same registry.
func (e *Env) StartOperatorServingMetrics(t *testing.T, ns, addr string) *Operator {
	t.Helper()
	return e.startOperator(t, e.ManagerBin, ns, nil, nil, "--metrics-bind-address="+addr, "--metrics-secure=false")
}

// StartOperatorInGroup runs the manager for namespace ns as root with primary group gid, so that
// host firewall rules can match its traffic alone (CutOffOperator) and not the kubelet's or the test's.
func (e *Env) StartOperatorInGroup(t *testing.T, ns string, gid uint32) *Operator {
	t.Helper()
	return e.startOperator(t, e.ManagerBin, ns, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: gid}}, nil)
}

// startOperator runs bin for ns with metrics and probes off; args come after those defaults and
// override them (the flag package keeps a flag's last value).
func (e *Env) startOperator(t *testing.T, bin, ns string, attr *syscall.SysProcAttr, extraEnv []string, args ...string) *Operator {
	t.Helper()
	o := &Operator{done: make(chan struct{}), logs: &bytes.Buffer{}, mu: &sync.Mutex{}}
	o.cmd = exec.Command(bin, append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false"}, args...)...)
	o.cmd.SysProcAttr = attr
	o.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+e.Kubeconfig, "WATCH_NAMESPACE="+ns), extraEnv...)
	if img := os.Getenv("IMG"); img != "" {
		// backup Jobs and restore init containers run the image `make cluster-load` loaded from this tree
		o.cmd.Env = append(o.cmd.Env, "OPERATOR_IMAGE="+img)
	}
	o.cmd.Stdout, o.cmd.Stderr = lockedWriter{o.mu, o.logs}, lockedWriter{o.mu, o.logs}
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { o.err = o.cmd.Wait(); close(o.done) }()
	t.Cleanup(func() {
		o.Stop()
		o.save(ns)
		if !t.Failed() {
			// Every test that runs an operator ends with the check that no secret of its namespace
			// reached the operator's log, an Event, a status or a Job's or Pod's args and env.
			leaks, err := e.SecretLeaks(context.Background(), ns, o.Logs())
			if err != nil {
				t.Errorf("look for leaked secrets: %v", err)
			}
			for _, l := range leaks {
				t.Errorf("secret leaked: %s", l)
			}
		}
		if t.Failed() {
			o.mu.Lock()
			t.Logf("operator log (last 8k):\n%s", tail(o.logs.String(), 8192))
			o.mu.Unlock()
			e.DumpEvents(t, ns)
		}
	})
	return o
}

// save writes the operator's whole log to $E2E_LOG_DIR/<namespace>-<pid>.log when that is set: a
// failure prints only the log's tail, and a flaky failure is understood from a passing run's log too.
func (o *Operator) save(ns string) {
	dir := os.Getenv("E2E_LOG_DIR")
	if dir == "" || o.cmd.Process == nil {
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", ns, o.cmd.Process.Pid)), []byte(o.Logs()), 0o644)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Logs is what the operator wrote so far.
func (o *Operator) Logs() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.logs.String()
}

// Kill ends the process with SIGKILL, as an OOM kill or a lost node would: nothing of its own runs.
func (o *Operator) Kill() {
	_ = o.cmd.Process.Kill()
	<-o.done
}

func (o *Operator) Stop() {
	select {
	case <-o.done:
		return
	default:
	}
	interruptThenKill(o.cmd.Process, o.done)
}

// interruptThenKill asks a process to end (SIGINT) and kills it when it has not ended 10 s later;
// done is closed when the process has ended.
func interruptThenKill(p *os.Process, done <-chan struct{}) {
	_ = p.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.Kill()
		<-done
	}
}

// WaitExit waits for the process to end by itself and returns its exit code.
func (o *Operator) WaitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-o.done:
		var ee *exec.ExitError
		if errors.As(o.err, &ee) {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(timeout):
		t.Fatalf("operator still running after %s", timeout)
		return -1
	}
}

func (e *Env) DumpEvents(t *testing.T, ns string) {
	evs := &corev1.EventList{}
	if err := e.K8s.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
		return
	}
	sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", e.LastTimestamp.Format("15:04:05"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	t.Logf("events in %s:\n%s", ns, tail(b.String(), 8192))
	pods := &corev1.PodList{}
	if err := e.K8s.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Logf("list pods in %s: %v", ns, err)
	}
	for _, p := range pods.Items {
		t.Logf("pod %s phase=%s ip=%s", p.Name, p.Status.Phase, p.Status.PodIP)
	}
}

func (e *Env) NewNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := e.K8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("E2E_KEEP_FAILED") != "" {
			return
		}
		// The test's operator has stopped by now; release its finalizers so the namespace can go.
		ctx := context.Background()
		release := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
		list := &etcdv1alpha1.EtcdClusterList{}
		_ = e.K8s.List(ctx, list, client.InNamespace(ns.Name))
		for i := range list.Items {
			_ = e.K8s.Patch(ctx, &list.Items[i], release)
		}
		backups := &etcdv1alpha1.EtcdBackupList{} // scheduled backups hold their snapshot's finalizer
		_ = e.K8s.List(ctx, backups, client.InNamespace(ns.Name))
		for i := range backups.Items {
			_ = e.K8s.Patch(ctx, &backups.Items[i], release)
		}
		schedules := &etcdv1alpha1.EtcdBackupScheduleList{} // a schedule holds one until its runs are gone
		_ = e.K8s.List(ctx, schedules, client.InNamespace(ns.Name))
		for i := range schedules.Items {
			_ = e.K8s.Patch(ctx, &schedules.Items[i], release)
		}
		_ = e.K8s.Delete(ctx, ns)
	})
	return ns.Name
}

func (e *Env) CreateCluster(t *testing.T, ns string, replicas int32, version string, mutate ...func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	c.Spec.Replicas, c.Spec.Version = replicas, version
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	for _, m := range mutate {
		m(c)
	}
	if err := e.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *Env) Get(t *testing.T, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	out := &etcdv1alpha1.EtcdCluster{}
	if err := e.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *Env) SetReplicas(t *testing.T, c *etcdv1alpha1.EtcdCluster, n int32) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	if err := e.K8s.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// WaitFor polls cond until it returns nil. A failure names, besides the last answer, each
// different answer on the way and when it first came: the last one alone often tells only what a
// later event (a restart, a roll) showed at the deadline, not what held the wait.
func WaitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var err error
	var seen []string
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		if line := err.Error(); len(seen) < 20 && (len(seen) == 0 || !strings.HasSuffix(seen[len(seen)-1], " "+line)) {
			seen = append(seen, fmt.Sprintf("+%s %s", time.Since(start).Round(time.Second), line))
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: not after %s: %v\nanswers on the way:\n  %s", what, timeout, err, strings.Join(seen, "\n  "))
}

// WaitConverged waits until the cluster has n healthy voting members, is Available and has nothing left to do.
// Available promises that a client of the published endpoint gets an answer, so right after it,
// with no retry loop of the test's own, a read through the client Service must succeed: every
// creation in the suites waits here, and so checks that promise.
//
// timeout bounds a stall, not the whole wait: it fails once what Converged reports (phase, counts,
// the Available and Progressing conditions) has not changed for timeout, or after three times
// timeout in all. A roll of every member is a chain of steps, each on time, whose sum outlasts any
// one fixed bound on a loaded machine; a stuck step still fails after timeout.
func (e *Env) WaitConverged(t *testing.T, c *etcdv1alpha1.EtcdCluster, n int32, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	lastChange, last := start, ""
	for {
		err := e.Converged(c, n)
		if err == nil {
			break
		}
		now := time.Now()
		if err.Error() != last {
			last, lastChange = err.Error(), now
		}
		if stalled := now.Sub(lastChange); stalled > timeout || now.Sub(start) > 3*timeout {
			t.Fatalf("%s converged at %d members: not after %s (unchanged for %s): %v",
				c.Name, n, now.Sub(start).Round(time.Second), stalled.Round(time.Second), err)
		}
		time.Sleep(time.Second)
	}
	// The Service's endpoints follow the pods through the EndpointSlice controller and kube-proxy, a
	// few seconds behind them under load: a member removed a moment ago may still be a backend.
	var err error
	for deadline := time.Now().Add(serviceFollowsPods); ; time.Sleep(time.Second) {
		if err = e.ClientServiceAnswers(c); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("%s is Available but a client of its client Service gets no answer for %s: %v", c.Name, serviceFollowsPods, err)
	}
}

// serviceFollowsPods bounds how long a Service's backends may lag its pods' readiness.
const serviceFollowsPods = 30 * time.Second

// ClientServiceAnswers reads a key through the cluster's client Service (its ClusterIP, which the
// host reaches through kube-proxy as a pod would), with the client certificate the operator
// publishes in status.endpoints.clientSecret, or in plain text when client TLS is disabled. Clusters
// with user-provided client TLS are skipped: the test holds their client certificates, not the framework.
func (e *Env) ClientServiceAnswers(c *etcdv1alpha1.EtcdCluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur := &etcdv1alpha1.EtcdCluster{}
	if err := e.K8s.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
		return err
	}
	if cur.Spec.TLS.Client == etcdv1alpha1.TLSUserProvided {
		return nil
	}
	svc := &corev1.Service{}
	if err := e.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.ClientService(c.Name)}, svc); err != nil {
		return fmt.Errorf("client Service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return fmt.Errorf("client Service %s has no ClusterIP", svc.Name)
	}
	cfg := clientv3.Config{DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	secure := cur.Spec.TLS.Client != etcdv1alpha1.TLSDisabled
	cfg.Endpoints = []string{naming.EndpointForIP(svc.Spec.ClusterIP, secure)}
	if secure {
		sec := &corev1.Secret{}
		if err := e.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: cur.Status.Endpoints.ClientSecret}, sec); err != nil {
			return fmt.Errorf("client secret %q: %w", cur.Status.Endpoints.ClientSecret, err)
		}
		pair, err := tls.X509KeyPair(sec.Data[pki.CertKey], sec.Data[pki.PrivKeyKey])
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(sec.Data[pki.CACertKey])
		cfg.TLS = etcdclient.TLSConfig(pair, pool, naming.ClientServiceHost(c.Name, c.Namespace))
	}
	cl, err := clientv3.New(cfg)
	if err != nil {
		return fmt.Errorf("dial %v: %w", cfg.Endpoints, err)
	}
	defer func() { _ = cl.Close() }()
	if _, err := cl.Get(ctx, "etcd-autopilot-e2e-client-service-check"); err != nil {
		return fmt.Errorf("read through %v: %w", cfg.Endpoints, err)
	}
	return nil
}

// Converged says why the cluster is not (yet) converged at n members, or nil.
func (e *Env) Converged(c *etcdv1alpha1.EtcdCluster, n int32) error {
	cur := &etcdv1alpha1.EtcdCluster{}
	if err := e.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil {
		return err
	}
	s := cur.Status
	av := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionAvailable)
	pr := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionProgressing)
	if av == nil || av.Status != metav1.ConditionTrue || pr == nil || pr.Status != metav1.ConditionFalse ||
		s.ReadyReplicas != n || s.Replicas != n || len(s.Members) != int(n) || s.PendingOperation != nil {
		return fmt.Errorf("phase=%s ready=%d/%d members=%d available=%v progressing=%v", s.Phase, s.ReadyReplicas, s.Replicas, len(s.Members), av, pr)
	}
	return nil
}

// EtcdClient dials the cluster from the host through pod IPs with the user client certificate
// the operator publishes in status.endpoints.clientSecret.
func (e *Env) EtcdClient(t *testing.T, c *etcdv1alpha1.EtcdCluster) *clientv3.Client {
	t.Helper()
	cl := e.EtcdClientAt(t, c, e.PodEndpoints(t, c)...)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// EtcdClientAt is a client of c's members at endpoints only, with c's client certificate; the caller
// closes it.
func (e *Env) EtcdClientAt(t *testing.T, c *etcdv1alpha1.EtcdCluster, endpoints ...string) *clientv3.Client {
	t.Helper()
	ctx := context.Background()
	cur := e.Get(t, c)
	sec := &corev1.Secret{}
	if err := e.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: cur.Status.Endpoints.ClientSecret}, sec); err != nil {
		t.Fatalf("client secret %q: %v", cur.Status.Endpoints.ClientSecret, err)
	}
	pair, err := tls.X509KeyPair(sec.Data[pki.CertKey], sec.Data[pki.PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sec.Data[pki.CACertKey])
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		TLS:         etcdclient.TLSConfig(pair, pool, naming.ClientServiceHost(c.Name, c.Namespace)),
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func (e *Env) PodEndpoints(t *testing.T, c *etcdv1alpha1.EtcdCluster) []string {
	eps, err := e.CurrentEndpoints(c)
	if err != nil {
		t.Fatal(err)
	}
	return eps
}

// CurrentEndpoints are the client URLs of the member pods that have an IP and are not going away.
func (e *Env) CurrentEndpoints(c *etcdv1alpha1.EtcdCluster) ([]string, error) {
	pods := &corev1.PodList{}
	if err := e.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return nil, err
	}
	var eps []string
	for _, p := range pods.Items {
		// Member pods only: Job pods (backups, test-restores) and a schedule's archive worker carry
		// the cluster's labels too, and serve no etcd.
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Labels[naming.LabelMember] != "" {
			eps = append(eps, naming.EndpointForIP(p.Status.PodIP, true))
		}
	}
	return eps, nil
}

// FollowPods points cl at the endpoints that list returns, every second, until stop is called: a
// client of the client Service would follow member pods as they are replaced, and so do tests.
func FollowPods(cl *clientv3.Client, list func() ([]string, error)) (stop func()) {
	return Every(time.Second, func() {
		if eps, err := list(); err == nil && len(eps) > 0 {
			cl.SetEndpoints(eps...)
		}
	})
}

// Every calls fn every period, in the background, until stop is called; stop waits for a call in
// progress to end and may be called more than once.
func Every(period time.Duration, fn func()) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(period):
			}
			fn()
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// StopWriter lets a cluster that just converged settle, stops w and its endpoint follower, and points
// cl at the current pods for the checks that follow.
func (e *Env) StopWriter(t *testing.T, w *Writer, stopFollowing func(), cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster) (acked []string, failed int) {
	t.Helper()
	w.FaultEnds()
	time.Sleep(2 * time.Second)
	acked, failed = w.Finish()
	stopFollowing()
	e.RefreshEndpoints(t, cl, c)
	return acked, failed
}

// RefreshEndpoints points cl at the current member pods (IPs change when pods are replaced).
func (e *Env) RefreshEndpoints(t *testing.T, cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster) {
	cl.SetEndpoints(e.PodEndpoints(t, c)...)
}

// MemberPods are c's member pods (not the pods of its backup Jobs or archive worker, which carry its
// labels too), those going away included.
func (e *Env) MemberPods(t *testing.T, c *etcdv1alpha1.EtcdCluster) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := e.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Labels[naming.LabelMember] != "" {
			out = append(out, p)
		}
	}
	return out
}

// MemberPodUIDs maps each member pod of c to its UID.
func (e *Env) MemberPodUIDs(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := e.MemberPods(t, c)
	out := map[string]string{}
	for _, p := range pods {
		out[p.Name] = string(p.UID)
	}
	return out
}

// Writer puts keys continuously and remembers which ones etcd acknowledged.
// Writer puts numbered keys one after another; a failed put is retried with the same key and value
// until it succeeds, as a careful client would, so every key it moves past is acknowledged.
type Writer struct {
	cl        *clientv3.Client
	prefix    string
	stop      chan struct{}
	done      chan struct{}
	mu        sync.Mutex
	acked     []string
	failed    int
	latencies []time.Duration
	starts    []time.Time // when each acknowledged put began
	acks      []time.Time // when each acknowledged put returned
	// from and to bound the fault window the writer must make progress through (CheckWrites): from
	// its start (or FaultBegins) until FaultEnds (or Finish).
	from, to time.Time
}

func StartWriter(cl *clientv3.Client, prefix string) *Writer {
	w := &Writer{cl: cl, prefix: prefix, stop: make(chan struct{}), done: make(chan struct{}), from: time.Now()}
	go func() {
		defer close(w.done)
		for i := 0; ; {
			select {
			case <-w.stop:
				return
			default:
			}
			key := fmt.Sprintf("%s%08d", prefix, i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			w.mu.Lock()
			cl := w.cl
			w.mu.Unlock()
			start := time.Now()
			_, err := cl.Put(ctx, key, "v-"+key)
			took := time.Since(start)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, key)
				w.latencies = append(w.latencies, took)
				w.starts = append(w.starts, start)
				w.acks = append(w.acks, start.Add(took))
				i++
			} else {
				w.failed++
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// Use makes the writer put through cl from its next attempt on, as a client that moves to other
// endpoints with other credentials does (e.g. from a plain-text cluster to the TLS one taking it over).
func (w *Writer) Use(cl *clientv3.Client) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cl = cl
}

// Finish stops the writer and returns the acknowledged keys and the number of failed attempts
// (each was retried until it succeeded, except possibly one in flight when the writer stopped).
func (w *Writer) Finish() (acked []string, failed int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.to.IsZero() {
		w.to = time.Now()
	}
	return w.acked, w.failed
}

// FaultBegins marks now as the start of the window the writer must make progress through; without
// it, the window starts when the writer did.
func (w *Writer) FaultBegins() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from = time.Now()
}

// FaultEnds marks now as the end of that window (the cluster converged again); without it, the
// window ends when the writer is finished.
func (w *Writer) FaultEnds() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.to.IsZero() {
		w.to = time.Now()
	}
}

// MaxWriteGap is the longest a writer may go without an acknowledged put during its fault window,
// and MinWindowAcks the fewest acknowledged puts the window must hold: a test "under writes" whose
// writer stalled (or never wrote) checks nothing about the writes the fault could have lost. A
// rolling step of a 3-member cluster keeps quorum, so writes pause at most for a leader election
// and the client's retry (5 s per attempt); 30 s leaves room for a loaded CI machine.
const (
	MaxWriteGap   = 30 * time.Second
	MinWindowAcks = 20
)

// Progress says whether the writer made progress throughout its fault window: at least minAcks
// puts acknowledged inside it, and no stretch of it longer than maxGap without one (from its start
// to the first, between two, from the last to its end). Call after Finish.
func (w *Writer) Progress(maxGap time.Duration, minAcks int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return progress(w.acks, w.from, w.to, maxGap, minAcks)
}

func progress(acks []time.Time, from, to time.Time, maxGap time.Duration, minAcks int) error {
	if to.IsZero() {
		return fmt.Errorf("the writer's window has no end: call Finish first")
	}
	n, last := 0, from
	for _, at := range acks {
		if at.Before(from) || at.After(to) {
			continue
		}
		if gap := at.Sub(last); gap > maxGap {
			return fmt.Errorf("no write acknowledged for %s (from %s to %s), more than %s, in the fault window %s–%s",
				gap.Round(time.Millisecond), last.UTC().Format("15:04:05.000"), at.UTC().Format("15:04:05.000"), maxGap, from.UTC().Format("15:04:05.000"), to.UTC().Format("15:04:05.000"))
		}
		n, last = n+1, at
	}
	if gap := to.Sub(last); gap > maxGap {
		return fmt.Errorf("no write acknowledged for the last %s of the fault window %s–%s (%d acknowledged in it), more than %s",
			gap.Round(time.Millisecond), from.UTC().Format("15:04:05.000"), to.UTC().Format("15:04:05.000"), n, maxGap)
	}
	if n < minAcks {
		return fmt.Errorf("%d writes acknowledged in the fault window %s–%s, want at least %d", n, from.UTC().Format("15:04:05.000"), to.UTC().Format("15:04:05.000"), minAcks)
	}
	return nil
}

// CheckWrites is the check of a test under writes: the writer (finished) made progress throughout
// its fault window (MaxWriteGap, MinWindowAcks), and every put it saw acknowledged is readable.
func CheckWrites(t *testing.T, cl *clientv3.Client, w *Writer) {
	t.Helper()
	if err := w.Progress(MaxWriteGap, MinWindowAcks); err != nil {
		t.Fatalf("writer under %s: %v", w.prefix, err)
	}
	w.mu.Lock()
	acked := append([]string(nil), w.acked...)
	w.mu.Unlock()
	CheckKeys(t, cl, w.prefix, acked)
}

// Latencies of the acknowledged puts, in order; call after Finish.
func (w *Writer) Latencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.latencies...)
}

// Slowest are the n slowest acknowledged puts, slowest first, each as the time it began and its
// latency: to match a latency percentile with what happened in the cluster at that moment.
func (w *Writer) Slowest(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	idx := make([]int, len(w.latencies))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return w.latencies[idx[a]] > w.latencies[idx[b]] })
	var out []string
	for _, i := range idx[:min(n, len(idx))] {
		out = append(out, fmt.Sprintf("%s %.1fms", w.starts[i].UTC().Format("15:04:05.000"), float64(w.latencies[i])/float64(time.Millisecond)))
	}
	return out
}

// CheckKeys asserts that every key is readable with its value (a linearizable read).
func CheckKeys(t *testing.T, cl *clientv3.Client, prefix string, keys []string) {
	t.Helper()
	if len(keys) == 0 {
		t.Fatalf("no keys to check under %s: a check of nothing", prefix)
	}
	lost, err := LostKeys(cl, prefix, keys)
	if err != nil {
		t.Fatal(err)
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes under %s are lost", lost, len(keys), prefix)
	}
}

// LostKeys counts the keys (written with the value "v-"+key) that a linearizable read does not return.
func LostKeys(cl *clientv3.Client, prefix string, keys []string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read back %s*: %w", prefix, err)
	}
	have := map[string]string{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = string(kv.Value)
	}
	lost := 0
	for _, k := range keys {
		if have[k] != "v-"+k {
			lost++
		}
	}
	return lost, nil
}

func PutKeys(t *testing.T, cl *clientv3.Client, prefix string, n int) []string {
	t.Helper()
	keys := make([]string, 0, n)
	ctx := context.Background()
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100 && j < n; j++ {
			k := fmt.Sprintf("%s%06d", prefix, j)
			ops = append(ops, clientv3.OpPut(k, "v-"+k))
			keys = append(keys, k)
		}
		if _, err := cl.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatalf("write batch at %d: %v", i, err)
		}
	}
	return keys
}
