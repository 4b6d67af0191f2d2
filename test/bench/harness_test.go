//go:build bench

// Package bench measures how much time the operator adds on top of etcd itself, on the real local
// cluster (hack/cluster): every operator figure is divided by the same event done by hand with bare
// etcd pods in the same run, so the machine's speed cancels out. `make bench` runs it and rewrites
// bench/results/*.json and BENCHMARKS.md.
//
// Setup is shared with test/e2e (test/framework); the helpers here need what the e2e ones do not:
// a 200 ms clock, operator logs on disk with timestamps, and cleanup that waits for volumes.
package bench

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// poll is how often the clock looks at the cluster: small against the 3–40 s being measured.
const poll = 200 * time.Millisecond

var (
	k8s        client.Client
	kubeconfig string
	managerBin string
	logDir     string // operator logs of this run, kept for reading timings afterwards
	podLogs    kubernetes.Interface
	fwEnv      *framework.Env
)

func TestMain(m *testing.M) {
	env, err := framework.Setup("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	k8s, kubeconfig, managerBin, fwEnv = env.K8s, env.Kubeconfig, env.ManagerBin, env
	if logDir, err = os.MkdirTemp("", "bench-logs"); err != nil {
		panic(err)
	}
	if podLogs, err = kubernetes.NewForConfig(env.Config); err != nil {
		panic(err)
	}
	fmt.Fprintf(os.Stderr, "bench: operator logs in %s\n", logDir)
	code := m.Run()
	env.Close()
	os.Exit(code)
}

// waitQuiet blocks until no e2e test is using the cluster, so both CPU cores are ours. A namespace
// that is Terminating with no pods left costs no CPU and may never go (an EtcdCluster whose operator
// has stopped keeps its finalizer), so it does not count.
func waitQuiet(t *testing.T) {
	t.Helper()
	logged := time.Time{}
	for {
		busy, err := busyE2ENamespaces()
		if err == nil && len(busy) == 0 {
			return
		}
		if time.Since(logged) > time.Minute {
			t.Logf("waiting for e2e namespaces to go: %v %v", busy, err)
			logged = time.Now()
		}
		time.Sleep(2 * time.Second)
	}
}

// settled is how long every member pod has been Ready before a fault is injected: etcd refuses a
// membership change until the leader has been connected to every voter for 5 s (its strict
// reconfiguration check), so a fault right after a restart would time that wait too, which a steady
// cluster never has.
const settled = 5 * time.Second

// waitSettled waits until every pod of ns with labels has been Ready for settled.
func waitSettled(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	waitFor(t, "members settled", timeout, func() (bool, error) {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && time.Since(c.LastTransitionTime.Time) >= settled
			}
			if !ready {
				return false, nil
			}
		}
		return len(pods.Items) > 0, nil
	})
}

func busyE2ENamespaces() ([]string, error) {
	ctx := context.Background()
	nss := &corev1.NamespaceList{}
	if err := k8s.List(ctx, nss); err != nil {
		return nil, err
	}
	var busy []string
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.Name, "e2e-") {
			continue
		}
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns.Name)); err != nil {
			return nil, err
		}
		if (ns.Status.Phase != corev1.NamespaceTerminating || len(pods.Items) > 0) && !abandoned(pods.Items) {
			busy = append(busy, ns.Name)
		}
	}
	return busy, nil
}

// abandoned says whether pods look left behind by an e2e run that ended (E2E_KEEP_FAILED keeps
// failed tests' namespaces): all ready and nothing started or changed readiness for two minutes.
// Idle etcd pods cost almost no CPU, while a running e2e test changes its pods far more often.
func abandoned(pods []corev1.Pod) bool {
	if len(pods) == 0 {
		return false // an Active namespace without pods yet is a test about to start
	}
	quietSince := time.Now().Add(-2 * time.Minute)
	for _, p := range pods {
		if p.CreationTimestamp.After(quietSince) {
			return false
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue && c.LastTransitionTime.Time.Before(quietSince)
			}
		}
		if !ready {
			return false
		}
	}
	return true
}

// newNamespace creates a bench-* namespace; the returned func deletes it and waits until it and its
// volumes are gone: the next measurement must not share the CPU, nor the local-path provisioner (which
// creates and deletes volumes with helper pods), with the teardown of this one.
func newNamespace(t *testing.T) (string, func()) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name, func() {
		_ = k8s.Delete(context.Background(), ns)
		waitFor(t, "namespace "+ns.Name+" gone", 5*time.Minute, func() (bool, error) {
			err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ns), &corev1.Namespace{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		waitFor(t, "volumes of "+ns.Name+" gone", 5*time.Minute, func() (bool, error) {
			pvs := &corev1.PersistentVolumeList{}
			if err := k8s.List(context.Background(), pvs); err != nil {
				return false, err
			}
			for _, pv := range pvs.Items {
				if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns.Name {
					return false, nil
				}
			}
			return true, nil
		})
	}
}

// waitFor polls cond every poll interval; it returns the time at which cond first held.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		var ok bool
		if ok, err = cond(); ok {
			return time.Now()
		}
		time.Sleep(poll)
	}
	t.Fatalf("%s: not after %s (last error: %v)", what, timeout, err)
	return time.Time{}
}

// intsFromEnv is the comma-separated list of integers in the environment variable name, or def.
func intsFromEnv(t *testing.T, name string, def []int) []int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, n)
	}
	return out
}

// operator is a manager process on the host scoped to one namespace, as test/e2e runs it.
type operator struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startOperator runs the manager for ns; args come after the defaults and override them.
func startOperator(t *testing.T, ns string, args ...string) *operator {
	t.Helper()
	logPath := filepath.Join(logDir, ns+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	o := &operator{done: make(chan struct{}), log: logPath}
	o.cmd = exec.Command(managerBin, append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false",
		"--zap-time-encoding=rfc3339nano", "--zap-log-level=" + cmp.Or(os.Getenv("BENCH_LOG_LEVEL"), "info")}, args...)...)
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "WATCH_NAMESPACE="+ns)
	if img := os.Getenv("IMG"); img != "" {
		o.cmd.Env = append(o.cmd.Env, "OPERATOR_IMAGE="+img) // backup Jobs and restore init containers
	}
	o.cmd.Stdout, o.cmd.Stderr = f, f
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = o.cmd.Wait(); _ = f.Close(); close(o.done) }()
	// Start the clock only once the controller runs, so the operator's own start-up is not measured.
	waitFor(t, "operator workers started", time.Minute, func() (bool, error) {
		b, err := os.ReadFile(logPath)
		return strings.Contains(string(b), "Starting workers"), err
	})
	return o
}

// withOperator runs body with a fresh bench-* namespace, a host operator scoped to it and an
// EtcdCluster named etcd that body fills in and creates; afterwards the EtcdCluster is deleted while
// its operator still runs (or its finalizer would hold the namespace forever), then everything goes.
func withOperator(t *testing.T, body func(ns string, c *etcdv1alpha1.EtcdCluster)) {
	ns, cleanup := newNamespace(t)
	defer cleanup()
	op := startOperator(t, ns)
	defer op.stop()
	defer func() {
		if t.Failed() {
			t.Logf("operator log: %s", op.log)
		}
	}()
	ctx := context.Background()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	defer func() {
		_ = k8s.Delete(ctx, c)
		waitFor(t, "EtcdCluster deleted", time.Minute, func() (bool, error) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &etcdv1alpha1.EtcdCluster{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}()
	body(ns, c)
}

func (o *operator) stop() {
	_ = o.cmd.Process.Signal(os.Interrupt)
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
}

// runningPods are the pods matching labels that have an IP and are not being deleted.
func runningPods(ns string, labels map[string]string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// clusterTLS is the client TLS config of an operator-run cluster, from the user client Secret the
// operator publishes.
func clusterTLS(c *etcdv1alpha1.EtcdCluster) (*tls.Config, error) {
	sec := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: naming.UserClientSecret(c.Name)}, sec); err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(sec.Data[pki.CertKey], sec.Data[pki.PrivKeyKey])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sec.Data[pki.CACertKey])
	return etcdclient.TLSConfig(pair, pool, naming.ClientServiceHost(c.Name, c.Namespace)), nil
}

// saveMemberLogs writes the etcd log of every pod of ns with labels into logDir, named after tag:
// where a figure's time went inside etcd (a lost publish, a late election) shows only there.
func saveMemberLogs(t *testing.T, ns string, labels map[string]string, tag string) {
	t.Helper()
	eachContainerLog(t, ns, labels, naming.EtcdContainer, "member logs not saved", func(pod string, b []byte) {
		if err := os.WriteFile(filepath.Join(logDir, fmt.Sprintf("%s-%s-%s.log", ns, tag, pod)), b, 0o644); err != nil {
			t.Logf("log of %s not saved: %v", pod, err)
		}
	})
}

// eachContainerLog hands the log of container in every pod of ns with labels to use; what cannot
// be read is logged after why, and skipped.
func eachContainerLog(t *testing.T, ns string, labels map[string]string, container, why string, use func(pod string, log []byte)) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Logf("%s: %v", why, err)
		return
	}
	for _, pod := range pods.Items {
		b, err := podLogs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
		if err != nil {
			t.Logf("%s: %s/%s: %v", why, pod.Name, container, err)
			continue
		}
		use(pod.Name, b)
	}
}

// logPodTimeline logs, for every pod of ns with labels, when it was created, scheduled, each
// container started and ended, and when it turned Ready, in seconds after start: where a figure's
// seconds went between the API objects. Kubernetes keeps these times to the second only.
func logPodTimeline(t *testing.T, ns string, labels map[string]string, start time.Time, tag string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Logf("%s: no timeline: %v", tag, err)
		return
	}
	at := func(ts metav1.Time) string { return fmt.Sprintf("%+.0fs", ts.Sub(start).Seconds()) }
	for _, pod := range pods.Items {
		line := []string{"created " + at(pod.CreationTimestamp)}
		for _, c := range pod.Status.Conditions {
			if (c.Type == corev1.PodScheduled || c.Type == corev1.PodReady) && c.Status == corev1.ConditionTrue {
				line = append(line, strings.ToLower(string(c.Type))+" "+at(c.LastTransitionTime))
			}
		}
		for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			switch s := cs.State; {
			case s.Terminated != nil:
				line = append(line, fmt.Sprintf("%s %s–%s", cs.Name, at(s.Terminated.StartedAt), at(s.Terminated.FinishedAt)))
			case s.Running != nil:
				line = append(line, fmt.Sprintf("%s %s–", cs.Name, at(s.Running.StartedAt)))
			}
		}
		t.Logf("%s: pod %s: %s", tag, pod.Name, strings.Join(line, ", "))
	}
}

// logContainerLog logs the output of container in the pods of ns with labels (a short one: a
// worker's summary line).
func logContainerLog(t *testing.T, ns string, labels map[string]string, container, tag string) {
	t.Helper()
	eachContainerLog(t, ns, labels, container, tag+": no log", func(pod string, b []byte) {
		t.Logf("%s: %s/%s: %s", tag, pod, container, strings.TrimSpace(string(b)))
	})
}
