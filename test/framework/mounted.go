package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
)

// MountedSecretClient is an etcd client of c that behaves like a pod mounting the user client Secret:
// each new TLS handshake uses the certificate and trusts the ca.crt the Secret holds at that moment
// (re-read every second), as a kubelet-updated volume would provide; established connections are kept.
func (e *Env) MountedSecretClient(t *testing.T, c *etcdv1alpha1.EtcdCluster) *clientv3.Client {
	t.Helper()
	var mu sync.Mutex
	var cert tls.Certificate
	var roots *x509.CertPool
	key := client.ObjectKey{Namespace: c.Namespace, Name: naming.UserClientSecret(c.Name)}
	load := func() error {
		s := &corev1.Secret{}
		if err := e.K8s.Get(context.Background(), key, s); err != nil {
			return err
		}
		pair, err := tls.X509KeyPair(s.Data[pki.CertKey], s.Data[pki.PrivKeyKey])
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(s.Data[pki.CACertKey]) {
			return errors.New("no CA certificate in " + key.String())
		}
		mu.Lock()
		cert, roots = pair, pool
		mu.Unlock()
		return nil
	}
	if err := load(); err != nil {
		t.Fatal(err)
	}
	stopReloading := Every(time.Second, func() { _ = load() }) // a failed read keeps the last good copy, as a volume does
	current := func() *tls.Config {
		mu.Lock()
		defer mu.Unlock()
		return etcdclient.TLSConfig(cert, roots, naming.ClientServiceHost(c.Name, c.Namespace))
	}
	cfg := current()
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &current().Certificates[0], nil
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error { return current().VerifyConnection(cs) }
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: e.PodEndpoints(t, c), DialTimeout: 5 * time.Second, TLS: cfg, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopReloading(); _ = cl.Close() })
	return cl
}

// ServedCertificate is the certificate a TLS server at addr presents. The handshake may then be
// refused for want of a client certificate: the server's certificate is read before that.
func ServedCertificate(addr string) (*x509.Certificate, error) {
	var served *x509.Certificate
	cfg := &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // only reads the certificate presented; trusts nothing
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				c, err := x509.ParseCertificate(raw[0])
				served = c
				return err
			}
			return nil
		},
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if conn != nil {
		_ = conn.Close()
	}
	if served == nil {
		return nil, fmt.Errorf("no certificate from %s: %w", addr, err)
	}
	return served, nil
}
