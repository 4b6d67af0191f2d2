package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

func TestIssueVerifiesAgainstCA(t *testing.T) {
	now := time.Now()
	ca, caData, err := NewCA("test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"*.demo-peer.ns.svc", "demo-client.ns.svc"}
	leaf, err := ca.Issue("demo-server", names, []net.IP{net.ParseIP("127.0.0.1")}, ServerAndClient, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf[CertKey], leaf[PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caData[CACertKey])
	for _, host := range []string{"demo-0.demo-peer.ns.svc", "demo-client.ns.svc", "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("verify as %s: %v", host, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other.ns.svc", Roots: pool}); err == nil {
		t.Error("certificate verified for a name it does not carry")
	}

	reloaded, err := LoadCA(caData)
	if err != nil {
		t.Fatal(err)
	}
	if reloaded.NeedsReissue(leaf, names, now) {
		t.Error("fresh certificate reported as needing reissue")
	}
	if !reloaded.NeedsReissue(leaf, append(names, "new.ns.svc"), now) {
		t.Error("missing SAN not detected")
	}
	if !reloaded.NeedsReissue(leaf, names, now.Add(leafValidity-RenewBefore/2)) {
		t.Error("expiry not detected")
	}
	other, _, _ := NewCA("other", now)
	if !other.NeedsReissue(leaf, names, now) {
		t.Error("certificate of another CA accepted")
	}
}

func TestClientOnlyCannotServe(t *testing.T) {
	now := time.Now()
	ca, caData, _ := NewCA("ca", now)
	leaf, err := ca.Issue("user", nil, nil, ClientOnly, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(leaf[CertKey], leaf[PrivKeyKey])
	cert, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caData[CACertKey])
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate usable as a server certificate")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}
}
