//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// migrateTimeout bounds a whole take-over: three members join (each a pod start and a catch-up), then
// three old members leave.
const migrateTimeout = 6 * time.Minute

// oldEtcd is a plain-text etcd run by a hand-written StatefulSet, as many teams run it today: the
// StatefulSet "old" and its headless Service "old-peer".
type oldEtcd struct {
	ns     string
	size   int
	sts    string
	labels map[string]string
	// tls, when set: the old members require certificates of their own CA from clients and peers
	tls *oldTLS
}

// oldTLS is the CA of an old etcd with TLS everywhere (in Secret oldCASecret, as a user hands it to
// migrateFrom.caSecret) and the certificate its members serve and present (Secret "old-tls"), which
// the test's clients present too.
type oldTLS struct {
	ca, leaf map[string][]byte
}

const oldCASecret = "old-ca"

// clientConfig is a client TLS configuration with the old members' certificate, verifying servers
// as serverName ("": the host dialed).
func (o *oldTLS) clientConfig(t *testing.T, serverName string) *tls.Config {
	t.Helper()
	pair, err := tls.X509KeyPair(o.leaf[pki.CertKey], o.leaf[pki.PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(o.ca[pki.CACertKey])
	if serverName == "" {
		return etcdclient.TLSConfigByHost(pair, pool)
	}
	return etcdclient.TLSConfig(pair, pool, serverName)
}

var oldLabels = map[string]string{"app": "old-etcd"}

// startOldEtcd creates the StatefulSet and waits until its members form a cluster. Members advertise
// their pod IP as client URL (the operator of these tests runs on the host, outside cluster DNS) and
// their stable DNS name as peer URL, which the new members resolve inside the cluster.
func startOldEtcd(t *testing.T, ns string, size int) *oldEtcd {
	t.Helper()
	return startOldEtcdWith(t, ns, size, nil)
}

// startOldEtcdTLS is startOldEtcd with TLS everywhere from a CA of its own: client certificates
// required on the client and the peer port. Its certificate names the pods' peer host names and,
// since the operator of these tests dials pod IPs from the host, every address of the node's pod CIDR.
func startOldEtcdTLS(t *testing.T, ns string, size int) *oldEtcd {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	ca, caData, err := pki.NewCA("legacy etcd CA", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("legacy-etcd", []string{"*.old-peer." + ns + ".svc"}, podCIDRAddresses(t), pki.ServerAndClient, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf[pki.CACertKey] = caData[pki.CACertKey]
	for name, data := range map[string]map[string][]byte{"old-tls": leaf, oldCASecret: caData} {
		if err := env.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	return startOldEtcdWith(t, ns, size, &oldTLS{ca: caData, leaf: leaf})
}

// podCIDRAddresses are the addresses of the (only) node's pod CIDR, at most 1024.
func podCIDRAddresses(t *testing.T) []net.IP {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := env.K8s.List(context.Background(), nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	prefix, err := netip.ParsePrefix(nodes.Items[0].Spec.PodCIDR)
	if err != nil || prefix.Bits() < 22 || !prefix.Addr().Is4() {
		t.Fatalf("pod CIDR %q: want an IPv4 /22 or smaller (%v)", nodes.Items[0].Spec.PodCIDR, err)
	}
	var ips []net.IP
	for a := prefix.Masked().Addr(); prefix.Contains(a); a = a.Next() {
		ips = append(ips, net.IP(a.AsSlice()))
	}
	return ips
}

func startOldEtcdWith(t *testing.T, ns string, size int, withTLS *oldTLS) *oldEtcd {
	t.Helper()
	ctx := context.Background()
	image, err := versions.Image(versions.Default)
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if withTLS != nil {
		scheme = "https"
	}
	host := func(i int) string { return fmt.Sprintf("old-%d.old-peer.%s.svc", i, ns) }
	var initial []string
	for i := 0; i < size; i++ {
		initial = append(initial, fmt.Sprintf("old-%d=%s://%s:%d", i, scheme, host(i), naming.PeerPort))
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "old-peer", Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: oldLabels,
			Ports: []corev1.ServicePort{
				{Name: "peer", Port: naming.PeerPort, TargetPort: intstr.FromInt32(naming.PeerPort)},
				{Name: "client", Port: naming.ClientPort, TargetPort: intstr.FromInt32(naming.ClientPort)},
			},
		},
	}
	if err := env.K8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(size)), ServiceName: "old-peer", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: oldLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: oldLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "etcd", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"/usr/local/bin/etcd"},
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						},
						Args: []string{
							"--name=$(POD_NAME)",
							"--data-dir=/var/lib/etcd/data",
							fmt.Sprintf("--listen-peer-urls=%s://0.0.0.0:%d", scheme, naming.PeerPort),
							fmt.Sprintf("--listen-client-urls=%s://0.0.0.0:%d", scheme, naming.ClientPort),
							fmt.Sprintf("--advertise-client-urls=%s://$(POD_IP):%d", scheme, naming.ClientPort),
							fmt.Sprintf("--initial-advertise-peer-urls=%s://$(POD_NAME).old-peer.%s.svc:%d", scheme, ns, naming.PeerPort),
							"--initial-cluster=" + strings.Join(initial, ","),
							"--initial-cluster-state=new",
							"--initial-cluster-token=old-" + ns,
						},
						VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
						SecurityContext: oldContainerSecurity(),
						Resources:       oldResources(),
					}},
					Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					SecurityContext:               oldPodSecurity(),
				},
			},
		},
	}
	if withTLS != nil {
		pod := &sts.Spec.Template.Spec
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "old-tls"}}})
		ctr := &pod.Containers[0]
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/etc/etcd/tls", ReadOnly: true})
		ctr.Args = append(ctr.Args,
			"--cert-file=/etc/etcd/tls/tls.crt", "--key-file=/etc/etcd/tls/tls.key", "--trusted-ca-file=/etc/etcd/tls/ca.crt", "--client-cert-auth=true",
			"--peer-cert-file=/etc/etcd/tls/tls.crt", "--peer-key-file=/etc/etcd/tls/tls.key", "--peer-trusted-ca-file=/etc/etcd/tls/ca.crt", "--peer-client-cert-auth=true")
	}
	return launchOldEtcd(t, sts, size, withTLS)
}

// The old pods pass the restricted Pod Security level the test namespaces enforce.
func oldContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func oldPodSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func oldResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}
}

// startEtcdIOOperatorShape runs a plain-text etcd the way etcd-io/etcd-operator (v0.1) builds one for
// an EtcdCluster named name, without that operator: a StatefulSet and a headless Service (no ports)
// both named name, labels app and controller = name, a ConfigMap name-state with the ETCD_INITIAL_*
// and ETCD_DATA_DIR variables, and the operator's default arguments: peer and client URLs under
// $(POD_NAME).name.$(POD_NAMESPACE).svc.cluster.local. Only the pod security settings and an emptyDir
// for the data directory are added (the test namespaces enforce the restricted level).
func startEtcdIOOperatorShape(t *testing.T, ns, name string, size int) *oldEtcd {
	t.Helper()
	ctx := context.Background()
	image, err := versions.Image(versions.Default)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": name, "controller": name}
	var initial []string
	for i := 0; i < size; i++ {
		initial = append(initial, fmt.Sprintf("%s-%d=http://%s-%d.%s.%s.svc.cluster.local:2380", name, i, name, i, name, ns))
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-state", Namespace: ns},
		Data: map[string]string{
			"ETCD_INITIAL_CLUSTER_STATE": "new",
			"ETCD_INITIAL_CLUSTER":       strings.Join(initial, ","),
			"ETCD_DATA_DIR":              "/var/lib/etcd",
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels},
	}
	for _, obj := range []client.Object{cm, svc} {
		if err := env.K8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(size)), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "etcd", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"/usr/local/bin/etcd"},
						Args: []string{
							"--name=$(POD_NAME)",
							"--listen-peer-urls=http://0.0.0.0:2380",
							"--listen-client-urls=http://0.0.0.0:2379",
							fmt.Sprintf("--initial-advertise-peer-urls=http://$(POD_NAME).%s.$(POD_NAMESPACE).svc.cluster.local:2380", name),
							fmt.Sprintf("--advertise-client-urls=http://$(POD_NAME).%s.$(POD_NAMESPACE).svc.cluster.local:2379", name),
						},
						Env:             []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace")},
						EnvFrom:         []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
						Ports:           []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
						VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
						SecurityContext: oldContainerSecurity(),
						Resources:       oldResources(),
					}},
					Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					AutomountServiceAccountToken:  ptr.To(false),
					SecurityContext:               oldPodSecurity(),
				},
			},
		},
	}
	return launchOldEtcd(t, sts, size, nil)
}

// launchOldEtcd creates sts and waits until its members form a cluster.
func launchOldEtcd(t *testing.T, sts *appsv1.StatefulSet, size int, withTLS *oldTLS) *oldEtcd {
	t.Helper()
	ctx := context.Background()
	if err := env.K8s.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	o := &oldEtcd{ns: sts.Namespace, size: size, sts: sts.Name, labels: sts.Spec.Selector.MatchLabels, tls: withTLS}
	framework.WaitFor(t, "the old etcd formed a cluster", 3*time.Minute, func() error {
		eps, err := o.endpoints()
		if err != nil || len(eps) < size {
			return fmt.Errorf("%d of %d old pods running (%w)", len(eps), size, err)
		}
		cl := o.client(t, eps)
		defer func() { _ = cl.Close() }()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cl.MemberList(cctx)
		if err != nil {
			return err
		}
		for _, m := range resp.Members {
			if m.Name == "" {
				return fmt.Errorf("member %x not started", m.ID)
			}
		}
		return nil
	})
	return o
}

// endpoints are the client URLs of the old pods that run.
func (o *oldEtcd) endpoints() ([]string, error) {
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(o.ns), client.MatchingLabels(o.labels)); err != nil {
		return nil, err
	}
	var eps []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			eps = append(eps, naming.EndpointForIP(p.Status.PodIP, o.tls != nil))
		}
	}
	return eps, nil
}

// client is a client of the old members at endpoints: plain text, or with their certificate.
func (o *oldEtcd) client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	if o.tls == nil {
		return plainClient(t, endpoints)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: o.tls.clientConfig(t, "")})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// scale sets the StatefulSet's replicas, as the user does on the old side.
func (o *oldEtcd) scale(t *testing.T, n int32) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: o.sts, Namespace: o.ns}}
	if err := env.K8s.Patch(context.Background(), sts, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

func plainClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// newMemberEndpoints are the plain-text client URLs of the member pods of EtcdCluster ns/name.
func newMemberEndpoints(ns, name string) ([]string, error) {
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(naming.Labels(name))); err != nil {
		return nil, err
	}
	var eps []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			eps = append(eps, naming.EndpointForIP(p.Status.PodIP, false))
		}
	}
	return eps, nil
}

// migratingCluster creates an EtcdCluster of replicas members taking over the old etcd; a failed
// test shows the namespace's events.
func migratingCluster(t *testing.T, ns string, replicas int32, o *oldEtcd, tls etcdv1alpha1.TLSMode, adopt bool) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	eps, err := o.endpoints()
	if err != nil {
		t.Fatal(err)
	}
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns}}
	c.Spec.Replicas, c.Spec.Version = replicas, versions.Default
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: tls, Peer: tls}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: eps}}
	if adopt {
		c.Spec.Bootstrap.MigrateFrom.AdoptObjects, c.Spec.Bootstrap.MigrateFrom.StatefulSetName = true, o.sts
	}
	if o.tls != nil {
		c.Spec.Bootstrap.MigrateFrom.CASecret = oldCASecret
	}
	if err := env.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.DumpEvents(t, ns)
		}
	})
	return c
}

func waitMigrated(t *testing.T, c *etcdv1alpha1.EtcdCluster, replicas int32) {
	t.Helper()
	framework.WaitFor(t, "Migrated", migrateTimeout, func() error {
		cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionMigrated)
		if cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Migrated: %+v", cond)
		}
		return nil
	})
	env.WaitConverged(t, c, replicas, convergeTimeout)
}

func memberList(t *testing.T, cl *clientv3.Client) *clientv3.MemberListResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// checkOnlyNewMembers asserts that the member list holds the EtcdCluster's members only.
func checkOnlyNewMembers(t *testing.T, cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster, replicas int) {
	t.Helper()
	resp := memberList(t, cl)
	if len(resp.Members) != replicas {
		t.Fatalf("%d members after the migration, want %d: %v", len(resp.Members), replicas, resp.Members)
	}
	suffix := fmt.Sprintf(".%s.%s.svc:%d", naming.PeerService(c.Name), c.Namespace, naming.PeerPort)
	for _, m := range resp.Members {
		if m.IsLearner || len(m.PeerURLs) != 1 || !strings.HasSuffix(m.PeerURLs[0], suffix) {
			t.Fatalf("member %s (%x, %v, learner %v) is not one of the EtcdCluster's voting members", m.Name, m.ID, m.PeerURLs, m.IsLearner)
		}
	}
}

// A 3-member etcd is taken over by a 3-member EtcdCluster under a writer: no acknowledged write
// lost, the cluster ID and the keys' revisions unchanged, the new members' data identical, the old
// members out of the member list. Sources: a hand-written plain-text StatefulSet, taken over into
// TLS everywhere (the writer moves from the old members in plain text to the new ones with a client
// certificate once one of them votes); etcd-io/etcd-operator's StatefulSet shape, kept in plain
// text; and a hand-written StatefulSet with TLS everywhere from its own CA, whose CA the operator
// takes over (migrateFrom.caSecret): the old clients' certificates still work at the end.
func TestMigrateFromStatefulSet(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		start func(t *testing.T, ns string) *oldEtcd
		tls   etcdv1alpha1.TLSMode
		// adopt sets migrateFrom.adoptObjects: the operator deletes the old StatefulSet at the end
		adopt bool
	}{
		{"hand-written StatefulSet into TLS, adopted", func(t *testing.T, ns string) *oldEtcd { return startOldEtcd(t, ns, 3) }, etcdv1alpha1.TLSOperatorManaged, true},
		{"etcd-io/etcd-operator shape", func(t *testing.T, ns string) *oldEtcd { return startEtcdIOOperatorShape(t, ns, "legacy", 3) }, etcdv1alpha1.TLSDisabled, false},
		{"hand-written StatefulSet with TLS everywhere, its CA taken over", func(t *testing.T, ns string) *oldEtcd { return startOldEtcdTLS(t, ns, 3) }, etcdv1alpha1.TLSOperatorManaged, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			framework.Parallel(t, 125*time.Second)
			migrateUnderWriter(t, tc.start, tc.tls, tc.adopt)
		})
	}
}

func migrateUnderWriter(t *testing.T, startSource func(t *testing.T, ns string) *oldEtcd, tls etcdv1alpha1.TLSMode, adopt bool) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-migrate-")
	old := startSource(t, ns)
	oldEps, _ := old.endpoints()
	plain := old.client(t, oldEps)
	t.Cleanup(func() { _ = plain.Close() })
	cl := plain
	seed := framework.PutKeys(t, cl, "/seed/", 1000)
	before, err := cl.Get(ctx, seed[0])
	if err != nil {
		t.Fatal(err)
	}
	clusterID, seedRev := before.Header.ClusterId, before.Kvs[0].ModRevision

	env.StartOperator(t, ns, "")
	// Clients follow the members as they come and go, as a client of both Services would.
	stopFollowing := framework.FollowPods(plain, func() ([]string, error) {
		eps, err := old.endpoints()
		if err != nil || tls != etcdv1alpha1.TLSDisabled {
			return eps, err
		}
		ours, err := newMemberEndpoints(ns, "etcd")
		return append(eps, ours...), err
	})
	w := framework.StartWriter(plain, "/during/")
	start := time.Now()
	c := migratingCluster(t, ns, 3, old, tls, adopt)
	var switched time.Duration
	if tls != etcdv1alpha1.TLSDisabled {
		// A TLS client of the new members, with the client certificate the operator publishes, as soon
		// as one of them votes (learners serve no writes); the old members stay plain text.
		framework.WaitFor(t, "a new member votes", migrateTimeout, func() error {
			if eps := votingEndpoints(c); len(eps) == 0 {
				return fmt.Errorf("no new voting member yet")
			}
			return nil
		})
		secure := env.EtcdClient(t, c)
		secure.SetEndpoints(votingEndpoints(c)...)
		stopSecure := framework.FollowPods(secure, func() ([]string, error) { return votingEndpoints(c), nil })
		defer stopSecure()
		w.Use(secure)
		switched = time.Since(start)
		cl = secure
	}
	waitMigrated(t, c, 3)
	migrated := time.Since(start)
	if tls != etcdv1alpha1.TLSDisabled {
		waitPeersSecured(t, c, 3)
	}
	took := time.Since(start)
	acked, failed := w.Finish()
	stopFollowing()
	ours, err := newMemberEndpoints(c.Namespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if tls != etcdv1alpha1.TLSDisabled {
		ours = env.PodEndpoints(t, c)
	}
	cl.SetEndpoints(ours...)

	framework.CheckKeys(t, cl, "/seed/", seed)
	framework.CheckWrites(t, cl, w)
	after, err := cl.Get(ctx, seed[0])
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.ClusterId != clusterID || after.Kvs[0].ModRevision != seedRev || after.Header.Revision <= seedRev {
		t.Fatalf("cluster %x, %s at revision %d (now %d); before: cluster %x, revision %d", after.Header.ClusterId, seed[0], after.Kvs[0].ModRevision, after.Header.Revision, clusterID, seedRev)
	}
	if got := env.Get(t, c).Status.ClusterID; got != fmt.Sprintf("%x", clusterID) {
		t.Fatalf("status.clusterID %s, want %x", got, clusterID)
	}
	checkOnlyNewMembers(t, cl, c, 3)
	// Every new member holds the same data at one revision.
	hashes := sameDataAt(t, cl, ours)
	cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionMigrated)
	if !strings.Contains(cond.Message, naming.ClientServiceHost(c.Name, c.Namespace)) {
		t.Fatalf("Migrated does not tell clients where to go: %s", cond.Message)
	}
	if old.tls != nil && !strings.Contains(cond.Message, naming.AnnotationRotateCA) {
		t.Fatalf("Migrated does not say how to leave the CA taken over: %s", cond.Message)
	}
	if adopt {
		checkOldStatefulSetDeleted(t, c, old)
	}
	if old.tls != nil {
		checkOldClientsKeepWorking(t, c, old.tls)
	}
	if tls != etcdv1alpha1.TLSDisabled {
		checkPeersTLSOnly(t, cl, c)
		t.Logf("writer moved to the new members over TLS after %s; migrated after %s; peer URLs on TLS and plain-text listeners gone after %s",
			switched.Round(time.Second), migrated.Round(time.Second), took.Round(time.Second))
	}
	t.Logf("migrated in %s under a writer: %d writes acknowledged, %d attempts failed and retried, 0 lost; cluster %x, %d members, hashes %v",
		took.Round(time.Second), len(acked), failed, clusterID, len(ours), hashes)
}

// checkOldClientsKeepWorking: a client with a certificate of the CA taken over (the old members'
// own) writes and reads on the new members, over the client Service name their certificates carry.
func checkOldClientsKeepWorking(t *testing.T, c *etcdv1alpha1.EtcdCluster, o *oldTLS) {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: env.PodEndpoints(t, c), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: o.clientConfig(t, naming.ClientServiceHost(c.Name, c.Namespace))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	keys := framework.PutKeys(t, cl, "/old-client/", 10)
	framework.CheckKeys(t, cl, "/old-client/", keys)
}

// checkOldStatefulSetDeleted asserts the end of a take-over with adoptObjects: the old StatefulSet and
// its pods are gone, its Service is kept, the deletion is recorded and announced.
func checkOldStatefulSetDeleted(t *testing.T, c *etcdv1alpha1.EtcdCluster, old *oldEtcd) {
	t.Helper()
	ctx := context.Background()
	framework.WaitFor(t, "the old StatefulSet and its pods deleted", time.Minute, func() error {
		sts := &appsv1.StatefulSet{}
		if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: old.ns, Name: old.sts}, sts); !apierrors.IsNotFound(err) {
			return fmt.Errorf("StatefulSet %s still there (%w)", old.sts, err)
		}
		pods := &corev1.PodList{}
		if err := env.K8s.List(ctx, pods, client.InNamespace(old.ns), client.MatchingLabels(old.labels)); err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d old pods left (%w)", len(pods.Items), err)
		}
		return nil
	})
	if mg := env.Get(t, c).Status.Migration; mg == nil || !mg.StatefulSetDeleted {
		t.Fatalf("the deletion is not recorded: %+v", mg)
	}
	cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionMigrated)
	if cond == nil || !strings.Contains(cond.Message, "deletes their StatefulSet "+old.sts) {
		t.Fatalf("Migrated does not say the StatefulSet goes: %+v", cond)
	}
	svcs := &corev1.ServiceList{}
	if err := env.K8s.List(ctx, svcs, client.InNamespace(old.ns)); err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, s := range svcs.Items {
		kept = kept || s.Name == "old-peer"
	}
	if !kept {
		t.Fatal("the old Service was deleted; adoptObjects deletes the StatefulSet only")
	}
}

// waitPeersSecured waits for the end of a take-over into peer TLS: every peer URL moved and the
// members restarted without their plain-text listener.
func waitPeersSecured(t *testing.T, c *etcdv1alpha1.EtcdCluster, replicas int32) {
	t.Helper()
	framework.WaitFor(t, "status.migration.peerTLS Secured", migrateTimeout, func() error {
		if mg := env.Get(t, c).Status.Migration; mg == nil || mg.PeerTLS != etcdv1alpha1.PeerTLSSecured {
			return fmt.Errorf("migration %+v", mg)
		}
		return nil
	})
	env.WaitConverged(t, c, replicas, convergeTimeout)
}

// votingEndpoints are the TLS client URLs of c's members that vote (status.members roles).
func votingEndpoints(c *etcdv1alpha1.EtcdCluster) []string {
	ctx := context.Background()
	cur := &etcdv1alpha1.EtcdCluster{}
	if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
		return nil
	}
	pods := &corev1.PodList{}
	if err := env.K8s.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return nil
	}
	ips := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ips[p.Name] = p.Status.PodIP
		}
	}
	var eps []string
	for _, m := range cur.Status.Members {
		if (m.Role == etcdv1alpha1.RoleLeader || m.Role == etcdv1alpha1.RoleFollower) && ips[m.Name] != "" {
			eps = append(eps, naming.EndpointForIP(ips[m.Name], true))
		}
	}
	return eps
}

// checkPeersTLSOnly asserts that every member's peer URL is TLS on the peer port, that the members
// run without their plain-text peer listener, and that the peer port refuses plain text.
func checkPeersTLSOnly(t *testing.T, cl *clientv3.Client, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range memberList(t, cl).Members {
		if want := naming.PeerURL(c.Name, c.Namespace, m.Name, true); len(m.PeerURLs) != 1 || m.PeerURLs[0] != want {
			t.Fatalf("member %s has peer URLs %v, want %s", m.Name, m.PeerURLs, want)
		}
	}
	pods := &corev1.PodList{}
	if err := env.K8s.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		t.Fatal(err)
	}
	plain := &http.Client{Timeout: 3 * time.Second}
	for _, p := range pods.Items {
		for _, a := range p.Spec.Containers[0].Args {
			if strings.Contains(a, fmt.Sprintf(":%d", naming.PlainPeerPort)) {
				t.Fatalf("pod %s still has a plain-text peer listener: %s", p.Name, a)
			}
		}
		// Once the old members are gone, only this cluster's peer certificates are accepted (off
		// while old members with certificates of their own were in, after a take-over from TLS).
		if want := "--peer-cert-allowed-cn=" + naming.PeerCommonName(c.Name); !slices.Contains(p.Spec.Containers[0].Args, want) {
			t.Fatalf("pod %s lacks %s: %v", p.Name, want, p.Spec.Containers[0].Args)
		}
		// A TLS server answers a plain-text request with 400 at most; the plain-text peer handler
		// would serve /version.
		r, err := plain.Get(fmt.Sprintf("http://%s:%d/version", p.Status.PodIP, naming.PeerPort))
		if err == nil {
			_ = r.Body.Close()
			if r.StatusCode == http.StatusOK {
				t.Fatalf("pod %s serves its peer port in plain text", p.Name)
			}
		}
	}
}

// The operator dies right after each step of a migration; a fresh operator finishes it.
func TestMigrationCrashAtEveryFailpointConverges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fp  string
		tls etcdv1alpha1.TLSMode
	}{
		{failpoint.AfterMigrationStart, etcdv1alpha1.TLSDisabled}, {failpoint.AfterMemberAdd, etcdv1alpha1.TLSDisabled}, {failpoint.AfterPromote, etcdv1alpha1.TLSDisabled},
		{failpoint.AfterOldMemberRemove, etcdv1alpha1.TLSDisabled},
		{failpoint.AfterPeerURLUpdate, etcdv1alpha1.TLSOperatorManaged},
	}
	for _, tc := range cases {
		fp := tc.fp
		t.Run(fp, func(t *testing.T) {
			framework.Parallel(t, 65*time.Second)
			ns := env.NewNamespace(t, "e2e-migrate-")
			old := startOldEtcd(t, ns, 3)
			oldEps, _ := old.endpoints()
			cl := plainClient(t, oldEps)
			t.Cleanup(func() { _ = cl.Close() })
			keys := framework.PutKeys(t, cl, "/crash/", 1000)

			crashing := env.StartOperator(t, ns, fp)
			// Into TLS: 3 members, so that a URL moves while the others still advertise plain text.
			replicas := int32(1)
			if tc.tls != etcdv1alpha1.TLSDisabled {
				replicas = 3
			}
			c := migratingCluster(t, ns, replicas, old, tc.tls, false)
			if code := crashing.WaitExit(t, migrateTimeout); code != failpoint.ExitCode {
				t.Fatalf("operator exit code %d, want the failpoint's %d", code, failpoint.ExitCode)
			}
			env.StartOperator(t, ns, "")
			waitMigrated(t, c, replicas)
			if tc.tls != etcdv1alpha1.TLSDisabled {
				waitPeersSecured(t, c, replicas)
				secure := env.EtcdClient(t, c)
				framework.CheckKeys(t, secure, "/crash/", keys)
				checkOnlyNewMembers(t, secure, c, int(replicas))
				checkPeersTLSOnly(t, secure, c)
				return
			}
			ours, err := newMemberEndpoints(c.Namespace, c.Name)
			if err != nil {
				t.Fatal(err)
			}
			cl.SetEndpoints(ours...)
			framework.CheckKeys(t, cl, "/crash/", keys)
			checkOnlyNewMembers(t, cl, c, 1)
		})
	}
}

// The old side loses quorum mid-migration: the operator stops, says so, and removes no member.
func TestMigrationStopsWhenTheSourceLosesQuorum(t *testing.T) {
	framework.Parallel(t, 75*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-migrate-")
	old := startOldEtcd(t, ns, 3)
	env.StartOperator(t, ns, "")
	c := migratingCluster(t, ns, 3, old, etcdv1alpha1.TLSDisabled, false)
	// Freeze the migration once one new member votes: 4 voters, 3 of them old.
	framework.WaitFor(t, "a new member votes", migrateTimeout, func() error {
		for _, m := range env.Get(t, c).Status.Members {
			if m.Role == etcdv1alpha1.RoleFollower || m.Role == etcdv1alpha1.RoleLeader {
				return nil
			}
		}
		return fmt.Errorf("no new voting member yet")
	})
	pause := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"maintenance":{"paused":true}}}`))
	if err := env.K8s.Patch(ctx, c, pause); err != nil {
		t.Fatal(err)
	}
	// Two old members go: 2 of 4 voters left, no quorum.
	old.scale(t, 1)
	framework.WaitFor(t, "two old pods gone", 2*time.Minute, func() error {
		eps, err := old.endpoints()
		if err != nil || len(eps) != 1 {
			return fmt.Errorf("%d old pods (%w)", len(eps), err)
		}
		return nil
	})
	resume := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"maintenance":{"paused":false}}}`))
	if err := env.K8s.Patch(ctx, c, resume); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "Migrated=False MigrationStopped", 2*time.Minute, func() error {
		cond := meta.FindStatusCondition(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionMigrated)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "MigrationStopped" {
			return fmt.Errorf("Migrated: %+v", cond)
		}
		return nil
	})
	// It stays stopped, and every member is still in the member list as the survivors know it.
	time.Sleep(30 * time.Second)
	cur := env.Get(t, c)
	if cond := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionMigrated); cond.Reason != "MigrationStopped" {
		t.Fatalf("Migrated: %+v", cond)
	}
	if cur.Status.PendingOperation != nil && cur.Status.PendingOperation.Type == "RemoveMember" {
		t.Fatalf("a removal is pending: %+v", cur.Status.PendingOperation)
	}
	eps, err := old.endpoints()
	if err != nil || len(eps) != 1 {
		t.Fatalf("old endpoints %v, %v", eps, err)
	}
	cl := plainClient(t, eps)
	defer func() { _ = cl.Close() }()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cl.MemberList(lctx, clientv3.WithSerializable())
	if err != nil {
		t.Fatal(err)
	}
	oldLeft := 0
	for _, m := range resp.Members {
		if strings.HasPrefix(m.Name, "old-") {
			oldLeft++
		}
	}
	if oldLeft != 3 {
		t.Fatalf("%d old members in the member list, want all 3: %v", oldLeft, resp.Members)
	}
}
