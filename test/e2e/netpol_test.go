//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// restrictedPod is a pod the restricted Pod Security level admits.
func restrictedPod(ns, name string, labels map[string]string, c corev1.Container) *corev1.Pod {
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}, RestartPolicy: corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To[int64](0)},
	}
}

// idlePod starts a pod that only sleeps, as a source of connections, and returns its IP.
func idlePod(t *testing.T, ns, name string, labels map[string]string) string {
	t.Helper()
	p := restrictedPod(ns, name, labels, corev1.Container{Name: "idle", Image: "localhost/busybox:1.35.0", Command: []string{"sleep", "3600"}})
	if err := env.K8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "pod "+ns+"/"+name+" running", 2*time.Minute, func() error {
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	return p.Status.PodIP
}

// TestNetworkPolicyEnforced: with the members' NetworkPolicy (on by default) enforced by the local
// cluster's netpol-enforcer, the members form a cluster (raft on 2380 between them), a client pod of the
// namespace reads over TLS, and the operator's backup Job snapshots a member; a pod of another namespace
// reaches neither 2379 nor 2380, and a pod of the namespace that is not a member cannot reach 2380.
// With spec.networkPolicy.enabled=false the policy goes and the same connections open: the refusals
// came from the policy.
func TestNetworkPolicyEnforced(t *testing.T) {
	framework.Parallel(t, 20*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-netpol-")
	other := env.NewNamespace(t, "e2e-netpol-other-")
	env.StartOperator(t, ns, "")
	c := env.CreateCluster(t, ns, 3, "")
	neighbourIP := idlePod(t, ns, "neighbour", map[string]string{"app": "neighbour"})
	strangerIP := idlePod(t, other, "stranger", map[string]string{"app": "stranger"})
	env.WaitConverged(t, c, 3, convergeTimeout)
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.NetworkPolicy(c.Name)}, &networkingv1.NetworkPolicy{}); err != nil {
		t.Fatalf("the cluster converged, but its NetworkPolicy: %v", err)
	}

	member := &corev1.Pod{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: env.Get(t, c).Status.Members[0].Name}, member); err != nil {
		t.Fatal(err)
	}
	at := func(port int) string { return net.JoinHostPort(member.Status.PodIP, strconv.Itoa(port)) }
	type path struct {
		name     string
		srcIP    string
		port     int
		filtered bool // refused while the policy is in force
	}
	paths := []path{
		{"namespace pod -> client port", neighbourIP, naming.ClientPort, false},
		{"namespace pod -> peer port", neighbourIP, naming.PeerPort, true},
		{"namespace pod -> metrics port", neighbourIP, naming.MetricsPort, true},
		{"other namespace -> client port", strangerIP, naming.ClientPort, true},
		{"other namespace -> peer port", strangerIP, naming.PeerPort, true},
	}
	for _, p := range paths {
		err := framework.DialFrom(p.srcIP, at(p.port), 3*time.Second)
		if p.filtered && err == nil {
			t.Errorf("%s: connected; the policy should refuse it", p.name)
		}
		if !p.filtered && err != nil {
			t.Errorf("%s: %v; the policy should admit it", p.name, err)
		}
	}

	// A client pod of the namespace reads a key through the client Service with the published certificate.
	cl := env.EtcdClient(t, c)
	if _, err := cl.Put(ctx, "netpol/greeting", "hello from the host"); err != nil {
		t.Fatal(err)
	}
	sec := env.Get(t, c).Status.Endpoints.ClientSecret
	reader := restrictedPod(ns, "reader", nil, corev1.Container{
		Name: "etcdctl", Image: member.Spec.Containers[0].Image,
		Command: []string{"/usr/local/bin/etcdctl", "--endpoints=https://" + naming.ClientServiceHost(c.Name, ns) + ":2379", "--dial-timeout=5s", "--command-timeout=10s",
			"--cacert=/tls/" + pki.CACertKey, "--cert=/tls/" + pki.CertKey, "--key=/tls/" + pki.PrivKeyKey, "get", "netpol/greeting", "--print-value-only"},
		VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}},
	})
	reader.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: sec}}}}
	reader.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)}
	if err := env.K8s.Create(ctx, reader); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the reader pod to finish", 2*time.Minute, func() error {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(reader), reader); err != nil {
			return err
		}
		switch reader.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			t.Fatalf("the reader pod failed: %+v", reader.Status.ContainerStatuses)
		}
		return fmt.Errorf("phase %s", reader.Status.Phase)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	out, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods(ns).GetLogs(reader.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || strings.TrimSpace(string(out)) != "hello from the host" {
		t.Fatalf("the reader pod read %q (%v)", out, err)
	}

	// The operator's backup Job (a pod of the cluster, not a member) reaches the client port.
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "snapshots", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}},
	}}
	if err := env.K8s.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	b := createBackup(t, ns, "through-the-policy", c.Name, etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: pvc.Name, Path: "netpol"}})
	waitBackup(t, b, etcdv1alpha1.BackupSucceeded, 3*time.Minute)

	// Opt out: the policy goes, and what it refused opens.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"networkPolicy":{"enabled":false}}}`))
	if err := env.K8s.Patch(ctx, env.Get(t, c), patch); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the NetworkPolicy deleted", 30*time.Second, func() error {
		err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.NetworkPolicy(c.Name)}, &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
	for _, p := range paths {
		framework.WaitFor(t, p.name+" open without the policy", 30*time.Second, func() error {
			return framework.DialFrom(p.srcIP, at(p.port), 3*time.Second)
		})
	}
}

// TestMetricsOnlyFromTheMonitoringNamespace (issue 13 item 7): a member serves its metrics and probe
// endpoints in plain HTTP on its pod IP alone, and its NetworkPolicy admits that port only from the
// monitoring namespace spec.networkPolicy.metricsFrom names (and the node: kubelet probes, and here
// the host-run operator and the alert test's Prometheus). A pod of the monitoring namespace scrapes
// etcd's metrics; a pod of another namespace cannot connect; the port is not on the member's loopback;
// the probes keep the member Ready without a restart.
func TestMetricsOnlyFromTheMonitoringNamespace(t *testing.T) {
	framework.Parallel(t, 10*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-metrics-")
	mon := env.NewNamespace(t, "e2e-metrics-mon-")
	other := env.NewNamespace(t, "e2e-metrics-other-")
	env.StartOperator(t, ns, "")
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	c.Spec.Replicas = 1
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	c.Spec.NetworkPolicy.MetricsFrom = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{naming.LabelNamespaceName: mon}}}}
	if err := env.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	scraperIP := idlePod(t, mon, "prometheus", map[string]string{"app": "prometheus"})
	strangerIP := idlePod(t, other, "stranger", map[string]string{"app": "stranger"})
	env.WaitConverged(t, c, 1, convergeTimeout)

	member := &corev1.Pod{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: env.Get(t, c).Status.Members[0].Name}, member); err != nil {
		t.Fatal(err)
	}
	metrics := net.JoinHostPort(member.Status.PodIP, strconv.Itoa(naming.MetricsPort))
	// The enforcer renders a pod's rules once it has seen it (a member's isolation, a new source's
	// admission), within seconds: both paths are polled.
	framework.WaitFor(t, "a pod of another namespace refused on "+metrics, 30*time.Second, func() error {
		if code, _, err := framework.GetFrom(strangerIP, metrics, "/metrics", 3*time.Second); err == nil {
			return fmt.Errorf("a pod of namespace %s scraped it (HTTP %d)", other, code)
		}
		return nil
	})
	framework.WaitFor(t, "the monitoring namespace's pod scrapes "+metrics, time.Minute, func() error {
		code, body, err := framework.GetFrom(scraperIP, metrics, "/metrics", 3*time.Second)
		if err != nil {
			return err
		}
		if code != 200 || !strings.Contains(body, "\netcd_server_has_leader 1\n") {
			return fmt.Errorf("HTTP %d, %d bytes without etcd_server_has_leader 1", code, len(body))
		}
		return nil
	})
	// The host (the node: kubelet probes, the operator run by the tests, the alert test's Prometheus)
	// still reads the members' metrics, as the operator's slowness measurements do.
	if _, err := etcdclient.ReadDiskLatency(ctx, naming.MetricsURL(member.Status.PodIP)); err != nil {
		t.Errorf("the node cannot read %s: %v", metrics, err)
	}
	// Bound to the pod IP, not to every interface: from inside the member's own network namespace
	// the pod IP answers and loopback does not.
	if err := framework.DialFrom(member.Status.PodIP, metrics, 3*time.Second); err != nil {
		t.Errorf("the member cannot reach its own metrics port at its pod IP: %v", err)
	}
	if err := framework.DialFrom(member.Status.PodIP, net.JoinHostPort("127.0.0.1", strconv.Itoa(naming.MetricsPort)), 3*time.Second); err == nil {
		t.Error("the metrics port listens on the member's loopback too")
	}

	// The probes (startup, liveness, readiness on the metrics port at the pod IP) pass: Ready, never
	// restarted. A readiness probe may time out once on a loaded machine (CI: 4 e2e tests at a time),
	// so Ready is waited for; a restart would mean the liveness probe failed, and is not.
	framework.WaitFor(t, member.Name+" Ready", 30*time.Second, func() error {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(member), member); err != nil {
			return err
		}
		ready := false
		for _, cond := range member.Status.Conditions {
			ready = ready || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			return fmt.Errorf("member %s not Ready: %+v", member.Name, member.Status.ContainerStatuses)
		}
		return nil
	})
	if len(member.Status.ContainerStatuses) != 1 || member.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("member %s restarted: container statuses %+v", member.Name, member.Status.ContainerStatuses)
	}
}
