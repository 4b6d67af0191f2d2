package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// The operator dials members by IP and verifies the certificate under the client Service name.
// This checks, against a real TLS etcd, that the right name passes and that a wrong name, another
// CA or a missing client certificate fail.
func TestTLSConfigVerifiesByNameNotAddress(t *testing.T) {
	now := time.Now()
	ca, caData, server := testCA(t, now)
	info := etcdtest.TLSFiles(t, server)
	m := etcdtest.StartTLSMember(t, info)
	if host, _, _ := net.SplitHostPort(m.ClientURL[len("https://"):]); net.ParseIP(host) == nil {
		t.Fatalf("want an IP endpoint, got %s", m.ClientURL)
	}

	clientData, _ := ca.Issue("operator", nil, nil, pki.ClientOnly, now)
	pair, _ := tls.X509KeyPair(clientData[pki.CertKey], clientData[pki.PrivKeyKey])
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caData[pki.CACertKey])
	_, otherData, _ := pki.NewCA("other", now)
	otherRoots := x509.NewCertPool()
	otherRoots.AppendCertsFromPEM(otherData[pki.CACertKey])

	try := func(cfg *tls.Config) error {
		c, err := New([]string{m.ClientURL}, cfg)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_, _, err = c.MemberList(context.Background())
		return err
	}
	if err := try(TLSConfig(pair, roots, "demo-client.ns.svc")); err != nil {
		t.Fatalf("right name and CA refused: %v", err)
	}
	if err := try(TLSConfig(pair, roots, "other.ns.svc")); err == nil {
		t.Error("a certificate for another name was accepted")
	}
	if err := try(TLSConfig(pair, otherRoots, "demo-client.ns.svc")); err == nil {
		t.Error("a server certificate from an untrusted CA was accepted")
	}
	noCert := TLSConfig(pair, roots, "demo-client.ns.svc")
	noCert.Certificates = nil
	if err := try(noCert); err == nil {
		t.Error("the server accepted a client without a certificate")
	}
}

// testCA makes a CA and a server certificate of it for the client Service name demo-client.ns.svc.
func testCA(t *testing.T, now time.Time) (ca *pki.CA, caData, server map[string][]byte) {
	t.Helper()
	ca, caData, err := pki.NewCA("test", now)
	if err != nil {
		t.Fatal(err)
	}
	server, err = ca.Issue("server", []string{"demo-client.ns.svc"}, nil, pki.ServerAndClient, now)
	if err != nil {
		t.Fatal(err)
	}
	return ca, caData, server
}
