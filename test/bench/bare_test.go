//go:build bench

package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// The baseline: etcd members as a careful person writes them by hand. Like the operator's members they
// speak TLS on client and peer ports, carry the same probes (resources.MemberProbes) and sit behind a
// headless peer Service and a client Service; membership is a static --initial-cluster. So the ratio
// measures what the operator adds, not what TLS or probes cost.

var bareLabels = map[string]string{"app": "bare-etcd"}

const (
	// busyboxImage is the local cluster's busybox (hack/images), the bare restore's download tool.
	busyboxImage      = "localhost/busybox:1.35.0"
	barePeerService   = "bare-peer"
	bareClientService = "bare-client"
	bareTLSSecret     = "bare-tls"
	bareTLSDir        = "/etc/etcd/tls"
)

// bare is one hand-made cluster of n members in ns.
type bare struct {
	ns, image string
	n         int
	secret    *corev1.Secret // server and peer certificate, shared by the members
	clientTLS *tls.Config    // the prober's client certificate, from the same CA
	// extraArgs go to every member's etcd after the usual ones (a variant's flags).
	extraArgs []string
}

func newBare(t *testing.T, ns, image string, n int) *bare {
	t.Helper()
	now := time.Now()
	ca, _, err := pki.NewCA("bare-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	clientHost := bareClientService + "." + ns + ".svc"
	// etcd checks a connecting peer's certificate against the reverse DNS name of its address, which
	// ends in the cluster domain: the wildcard is there in both forms, as on the operator's certificates.
	peers := "*." + barePeerService + "." + ns + ".svc"
	server, err := ca.Issue("bare-member", []string{peers, peers + ".cluster.local", clientHost}, nil, pki.ServerAndClient, now)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ca.Issue("bench", nil, nil, pki.ClientOnly, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(cl[pki.CertKey], cl[pki.PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	return &bare{ns: ns, image: image, n: n,
		secret:    &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bareTLSSecret, Namespace: ns}, Data: server},
		clientTLS: etcdclient.TLSConfig(pair, roots, clientHost)}
}

// createShared makes what the members share: the Secret and both Services.
func (b *bare) createShared(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, b.secret); err != nil {
		t.Fatal(err)
	}
	for _, svc := range b.services() {
		if err := k8s.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
}

// create makes the Secret, both Services, and every member's PVC and pod.
func (b *bare) create(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	b.createShared(t)
	for i := 0; i < b.n; i++ {
		if err := k8s.Create(ctx, barePVC(b.ns, i)); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, b.pod(i, b.image)); err != nil {
			t.Fatal(err)
		}
	}
}

// createRestoring makes the one-member cluster start from the snapshot at url, as a person restores
// by hand: an init container downloads it (busybox wget) onto the member's volume, another restores
// it there with the etcd image's etcdutl, then etcd starts on the restored data directory.
func (b *bare) createRestoring(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	b.createShared(t)
	if err := k8s.Create(ctx, barePVC(b.ns, 0)); err != nil {
		t.Fatal(err)
	}
	pod := b.pod(0, b.image)
	etcd := pod.Spec.Containers[0]
	flag := func(name string) string {
		for _, a := range etcd.Args {
			if strings.HasPrefix(a, name+"=") {
				return a
			}
		}
		t.Fatalf("the bare member has no %s", name)
		return ""
	}
	snapshot := naming.DataDir + "/restore.db"
	data := []corev1.VolumeMount{etcd.VolumeMounts[0]}
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "fetch", Image: busyboxImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"wget", "-q", "-O", snapshot, url},
			VolumeMounts: data, SecurityContext: etcd.SecurityContext},
		{Name: "restore", Image: b.image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/usr/local/bin/etcdutl", "snapshot", "restore", snapshot, flag("--data-dir"), flag("--name"),
				flag("--initial-cluster"), flag("--initial-cluster-token"), flag("--initial-advertise-peer-urls")},
			VolumeMounts: data, SecurityContext: etcd.SecurityContext},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// bareRecreate is how a member's pod is made again by hand.
type bareRecreate struct {
	// probes: the member's probes, or none (a pod without probes is Ready as soon as its container
	// runs, before etcd serves, as in the official etcd operator's pods).
	probes bool
	// peerWait: an init container that waits until a peer's port takes its connections, as a person
	// who protects the peer port with a NetworkPolicy (protect) writes one: a pod's new address is
	// admitted only once the policy's enforcer has seen it, and etcd's first publish before that is lost.
	peerWait bool
}

// recreatePod makes member name's pod again, on its PVC, at image, as how says.
func (b *bare) recreatePod(t *testing.T, name, image string, how bareRecreate) {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(name, "bare-%d", &i); err != nil {
		t.Fatalf("member name %q: %v", name, err)
	}
	pod := b.pod(i, image)
	if !how.probes {
		etcd := &pod.Spec.Containers[0]
		etcd.StartupProbe, etcd.LivenessProbe, etcd.ReadinessProbe = nil, nil, nil
	}
	if how.peerWait {
		peer := fmt.Sprintf("bare-%d.%s.%s.svc", (i+1)%b.n, barePeerService, b.ns)
		pod.Spec.InitContainers = []corev1.Container{{Name: "wait-peer", Image: busyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"sh", "-c", fmt.Sprintf("until nc -w 1 %s %d -e true; do sleep 0.1; done", peer, naming.PeerPort)},
			SecurityContext: pod.Spec.Containers[0].SecurityContext}}
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// protect gives the members the protection the operator's NetworkPolicy gives its own: the peer port
// only from the members, the client and metrics ports from the namespace's pods (and, on this
// cluster's enforcer, from the node: the kubelet's probes and the bench's prober).
func (b *bare) protect(t *testing.T) {
	t.Helper()
	tcp := corev1.ProtocolTCP
	port := func(p int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(p))}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: b.ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: bareLabels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: bareLabels}}}, Ports: []networkingv1.NetworkPolicyPort{port(naming.PeerPort)}},
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}, Ports: []networkingv1.NetworkPolicyPort{port(naming.ClientPort), port(naming.MetricsPort)}},
			},
		},
	}
	if err := k8s.Create(context.Background(), np); err != nil {
		t.Fatal(err)
	}
}

func (b *bare) services() []*corev1.Service {
	port := func(name string, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, TargetPort: intstr.FromInt32(p)}
	}
	return []*corev1.Service{
		{
			ObjectMeta: metav1.ObjectMeta{Name: barePeerService, Namespace: b.ns},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: bareLabels,
				Ports: []corev1.ServicePort{port("peer", naming.PeerPort)}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: bareClientService, Namespace: b.ns},
			Spec:       corev1.ServiceSpec{Selector: bareLabels, Ports: []corev1.ServicePort{port("client", naming.ClientPort)}},
		},
	}
}

func barePVC(ns string, i int) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bare-%d", i), Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{ // no class: the default one (local-path), as the operator does
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storageSize)}},
		},
	}
}

// pod is member i. Security context, data path and probes match the operator's pod, so volume set-up
// (fsGroup) and readiness cost the same on both sides.
func (b *bare) pod(i int, image string) *corev1.Pod {
	host := func(j int) string { return fmt.Sprintf("bare-%d.%s.%s.svc", j, barePeerService, b.ns) }
	var initial []string
	for j := 0; j < b.n; j++ {
		initial = append(initial, fmt.Sprintf("bare-%d=https://%s:%d", j, host(j), naming.PeerPort))
	}
	name := fmt.Sprintf("bare-%d", i)
	startup, liveness, readiness := resources.MemberProbes()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns, Labels: bareLabels},
		Spec: corev1.PodSpec{
			Hostname: name, Subdomain: barePeerService,
			Containers: []corev1.Container{{
				Name: "etcd", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/usr/local/bin/etcd"},
				Args: append([]string{
					"--name=" + name,
					"--data-dir=" + naming.DataDir + "/data",
					fmt.Sprintf("--listen-peer-urls=https://0.0.0.0:%d", naming.PeerPort),
					fmt.Sprintf("--listen-client-urls=https://0.0.0.0:%d", naming.ClientPort),
					fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", naming.MetricsPort),
					fmt.Sprintf("--advertise-client-urls=https://%s:%d", host(i), naming.ClientPort),
					fmt.Sprintf("--initial-advertise-peer-urls=https://%s:%d", host(i), naming.PeerPort),
					"--initial-cluster=" + strings.Join(initial, ","),
					"--initial-cluster-state=new",
					"--initial-cluster-token=bare-" + b.ns,
					"--cert-file=" + bareTLSDir + "/tls.crt", "--key-file=" + bareTLSDir + "/tls.key",
					"--trusted-ca-file=" + bareTLSDir + "/ca.crt", "--client-cert-auth=true",
					"--peer-cert-file=" + bareTLSDir + "/tls.crt", "--peer-key-file=" + bareTLSDir + "/tls.key",
					"--peer-trusted-ca-file=" + bareTLSDir + "/ca.crt", "--peer-client-cert-auth=true",
					// As the operator's members: only the peer certificate's CN is let in on the peer port.
					"--peer-cert-allowed-cn=bare-member",
				}, b.extraArgs...),
				Ports:          []corev1.ContainerPort{{Name: "client", ContainerPort: naming.ClientPort}, {Name: "metrics", ContainerPort: naming.MetricsPort}},
				StartupProbe:   startup,
				LivenessProbe:  liveness,
				ReadinessProbe: readiness,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "data", MountPath: naming.DataDir},
					{Name: "tls", MountPath: bareTLSDir, ReadOnly: true},
				},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
			}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: bareTLSSecret, DefaultMode: ptr.To[int32](0o440)}}},
			},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext:               nonRootPod(),
		},
	}
}

// nonRootPod is the pod security context of the bench's own pods: the user the operator's member pods run as.
func nonRootPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
	}
}
