//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// testIssuer signs certificates the way cert-manager's CA Issuer does (RSA 2048 keys, the usages the
// Certificate asks for, ca.crt = the issuer's CA), independently of the operator's own pki package.
type testIssuer struct {
	cert    *x509.Certificate
	key     *rsa.PrivateKey
	certPEM []byte
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e issuer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testIssuer{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns kubernetes.io/tls Secret data for a leaf valid for lifetime.
func (is *testIssuer) issue(t *testing.T, cn string, dns []string, lifetime time.Duration, usages ...x509.ExtKeyUsage) map[string][]byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, &key.PublicKey, is.key)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"ca.crt":  is.certPEM,
	}
}

// Item 6, user-provided certificates: a cluster runs on Secrets the user issued (as cert-manager would:
// one shared certificate per role, SANs for the client Service and the peer wildcard); a client with
// a certificate of the user's CA works. The Secrets are then renewed (new keys and leaves, same CA)
// under a writer: every member serves the new certificates without a restart, the operator keeps
// observing every member healthy, status reports the new expiry, and no acknowledged write is lost.
// Last, a client certificate of the same CA is refused on every member's peer port.
func TestUserProvidedCertificatesRenewedUnderWrites(t *testing.T) {
	framework.Parallel(t, 125*time.Second)
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-")
	env.StartOperator(t, ns, "")
	const name = "etcd"
	clientHost := naming.ClientServiceHost(name, ns)
	peerWildcard := fmt.Sprintf("*.%s.%s.svc", naming.PeerService(name), ns)
	serverNames := []string{clientHost, clientHost + ".cluster.local", peerWildcard, peerWildcard + ".cluster.local"}
	peerNames := []string{peerWildcard, peerWildcard + ".cluster.local"}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	is := newTestIssuer(t)
	put := func(secret string, data map[string][]byte) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns}, Type: corev1.SecretTypeTLS, Data: data}
		err := env.K8s.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			err = env.K8s.Update(ctx, s)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	issueAll := func(lifetime time.Duration) {
		put("user-server", is.issue(t, "etcd server", serverNames, lifetime, both...))
		put("user-peer", is.issue(t, "etcd peer", peerNames, lifetime, both...))
		put("user-operator", is.issue(t, "etcd-autopilot", nil, lifetime, x509.ExtKeyUsageClientAuth))
	}
	issueAll(6 * time.Hour)

	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	c.Spec.Replicas = 3
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided,
		Secrets: &etcdv1alpha1.TLSSecrets{Server: "user-server", OperatorClient: "user-operator", Peer: "user-peer"}}
	// TLS alone must refuse a client certificate on the peer port (below): without the NetworkPolicy,
	// which would reset the connection first.
	c.Spec.NetworkPolicy.Enabled = ptr.To(false)
	start := time.Now()
	if err := env.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	t.Logf("Available on user certificates after %s", time.Since(start).Round(time.Second))

	app := is.issue(t, "app", nil, time.Hour, x509.ExtKeyUsageClientAuth)
	pair, err := tls.X509KeyPair(app["tls.crt"], app["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(is.certPEM)
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: env.PodEndpoints(t, c), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: etcdclient.TLSConfig(pair, roots, clientHost),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	framework.PutKeys(t, cl, "/before/", 10)

	stop := followPods(cl, c)
	w := framework.StartWriter(cl, "/renewal/")
	uids := env.MemberPodUIDs(t, c)
	oldServer, oldPeer := secretSerial(t, c, "user-server"), secretSerial(t, c, "user-peer")
	time.Sleep(5 * time.Second) // some writes before the renewal
	start = time.Now()
	w.FaultBegins()
	issueAll(12 * time.Hour) // cert-manager's renewal: new keys and leaves, the same CA
	if secretSerial(t, c, "user-server") == oldServer || secretSerial(t, c, "user-peer") == oldPeer {
		t.Fatal("the renewal changed no certificate")
	}
	waitServed(t, c, "user-server", naming.ClientPort, 3*time.Minute)
	waitServed(t, c, "user-peer", naming.PeerPort, time.Minute)
	t.Logf("renewed user certificates served by every member after %s", time.Since(start).Round(time.Second))
	for pod, uid := range env.MemberPodUIDs(t, c) {
		if uids[pod] != uid {
			t.Errorf("pod %s was restarted by a renewal under the same CA", pod)
		}
	}
	framework.WaitFor(t, "status reports the renewed certificates' expiry", time.Minute, func() error {
		s := env.Get(t, c).Status
		if len(s.TLS.Certificates) != 3 {
			return fmt.Errorf("status.tls.certificates = %+v", s.TLS.Certificates)
		}
		for _, cs := range s.TLS.Certificates {
			if left := time.Until(cs.NotAfter.Time); left < 11*time.Hour {
				return fmt.Errorf("%s expires in %s: the old certificate", cs.Secret, left.Round(time.Minute))
			}
		}
		return nil
	})
	env.WaitConverged(t, c, 3, time.Minute) // the operator still observes every member healthy
	time.Sleep(5 * time.Second)             // writes after the renewal
	acked, failed := env.StopWriter(t, w, stop, cl, c)
	t.Logf("writer: %d acknowledged, %d failed attempts (each retried until acknowledged)", len(acked), failed)
	framework.CheckWrites(t, cl, w)

	// A client certificate of the same Issuer cannot speak the peer protocol: the CN is the user's,
	// so members check that a peer certificate is valid for a name under the peer wildcard.
	put("user-app", app)
	intruder := intruderPod(env.Get(t, c), "intruder-app", "user-app")
	if err := env.K8s.Create(ctx, intruder); err != nil {
		t.Fatal(err)
	}
	log := podLogsWhenDone(t, intruder, 2*time.Minute)
	if refused := strings.Count(log, "failed to get cluster response"); refused < 3 || !strings.Contains(log, "bad certificate") || strings.Contains(log, "member count is unequal") {
		t.Errorf("want every member's peer port to refuse the app's client certificate (%d refusals, want 3, each a bad certificate); log:\n%s", refused, log)
	}
	env.WaitConverged(t, c, 3, time.Minute)
}
