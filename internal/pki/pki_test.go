package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
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

// During a CA rotation ca.crt is a bundle: LoadCA takes the CA of ca.key (the first certificate), the
// next CA sits under its own keys, and a leaf of either CA verifies against the bundle.
func TestRotationBundleAndNextCA(t *testing.T) {
	now := time.Now()
	old, oldData, _ := NewCA("old", now)
	next, nextData, _ := NewCA("next", now)
	data := map[string][]byte{
		CACertKey: Bundle(old, next), CAKeyKey: oldData[CAKeyKey],
		NextCACertKey: nextData[CACertKey], NextCAKeyKey: nextData[CAKeyKey],
	}
	cur, err := LoadCA(data)
	if err != nil || !cur.Cert.Equal(old.Cert) || string(cur.CertPEM) != string(oldData[CACertKey]) {
		t.Fatalf("LoadCA of a bundle: %v", err)
	}
	n, err := LoadNextCA(data)
	if err != nil || n == nil || !n.Cert.Equal(next.Cert) {
		t.Fatalf("LoadNextCA: %v", err)
	}
	if n, err := LoadNextCA(oldData); n != nil || err != nil {
		t.Errorf("LoadNextCA without a next CA = %v, %v", n, err)
	}
	if _, err := LoadNextCA(map[string][]byte{NextCACertKey: nextData[CACertKey]}); err == nil {
		t.Error("a next CA without its key was accepted")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(data[CACertKey])
	for _, ca := range []*CA{cur, n} {
		leaf, _ := ca.Issue("c", nil, nil, ClientOnly, now)
		pair, _ := tls.X509KeyPair(leaf[CertKey], leaf[PrivKeyKey])
		cert, _ := x509.ParseCertificate(pair.Certificate[0])
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("leaf of %s against the bundle: %v", ca.Cert.Subject.CommonName, err)
		}
		if got, want := n.NeedsReissue(leaf, nil, now), ca == cur; got != want {
			t.Errorf("NeedsReissue by the next CA of a leaf of %s is wrong", ca.Cert.Subject.CommonName)
		}
	}
	leafData, _ := old.Issue("c", nil, nil, ClientOnly, now)
	if _, err := LoadCA(leafData); err == nil {
		t.Error("LoadCA accepted a leaf certificate as a CA")
	}
}

func TestExpiryAndRotationTime(t *testing.T) {
	now := time.Now()
	ca, data, _ := NewCA("ca", now)
	if got, ok := NotAfter(data[CACertKey]); !ok || !got.Equal(ca.Cert.NotAfter) {
		t.Errorf("NotAfter = %v, %v", got, ok)
	}
	if _, ok := NotAfter([]byte("not PEM")); ok {
		t.Error("NotAfter of garbage")
	}
	if ca.NeedsRotation(now) || !ca.NeedsRotation(now.Add(caValidity-CARenewBefore+time.Hour)) {
		t.Error("NeedsRotation is wrong about a fresh CA or one within CARenewBefore of expiry")
	}
}

// A running cluster's CA (migrateFrom.caSecret) is often made by openssl or cfssl: RSA keys in
// PKCS #1 or PKCS #8. The operator signs with it, and refuses a key that is not the certificate's.
func TestLoadCATakesTheKeysOfCommonCATools(t *testing.T) {
	now := time.Now()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "legacy etcd CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour * 24 * 365), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pkcs8, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, keyPEM := range map[string][]byte{
		"PKCS #1": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}),
		"PKCS #8": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	} {
		ca, err := LoadCA(map[string][]byte{CACertKey: certPEM, CAKeyKey: keyPEM})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		leaf, err := ca.Issue("peer", []string{"*.etcd-peer.ns.svc"}, nil, ServerAndClient, now)
		if err != nil {
			t.Fatalf("%s: issue: %v", name, err)
		}
		if !ca.SignedBy(leaf) {
			t.Errorf("%s: the issued certificate does not verify against the CA", name)
		}
	}
	_, otherData, _ := NewCA("other", now)
	if _, err := LoadCA(map[string][]byte{CACertKey: certPEM, CAKeyKey: otherData[CAKeyKey]}); err == nil || !strings.Contains(err.Error(), "is not the key of the CA certificate") {
		t.Errorf("a key of another CA: got %v", err)
	}
}
