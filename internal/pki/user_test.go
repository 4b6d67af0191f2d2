package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

// userLeaf signs a leaf like cert-manager's CA issuer does, with the EKUs given (none: any usage).
func userLeaf(t *testing.T, ca *CA, dns []string, eku []x509.ExtKeyUsage, notBefore, notAfter time.Time) map[string][]byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "user"}, DNSNames: dns,
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: eku,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{CertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), PrivKeyKey: keyPEM, CACertKey: ca.CertPEM}
}

func TestCheckUserCertificates(t *testing.T) {
	now := time.Now()
	ca, _, err := NewCA("user-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := NewCA("other-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	names := UserNames{ClientServiceHost: "demo-client.ns.svc", PeerWildcards: []string{"*.demo-peer.ns.svc", "*.demo-peer.ns.svc.cluster.local"}}
	valid := func(from, to time.Time) (server, op, peer map[string][]byte) {
		return userLeaf(t, ca, []string{"demo-client.ns.svc", "*.demo-peer.ns.svc"}, nil, from, to),
			userLeaf(t, ca, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, from, to),
			userLeaf(t, ca, []string{"*.demo-peer.ns.svc", "*.demo-peer.ns.svc.cluster.local"}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, from, to)
	}
	server, op, peer := valid(now.Add(-time.Hour), now.Add(90*24*time.Hour))
	with := func(data map[string][]byte, k string, v []byte) map[string][]byte {
		out := maps.Clone(data)
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	expired, _, _ := valid(now.Add(-48*time.Hour), now.Add(-time.Hour))
	future, _, _ := valid(now.Add(time.Hour), now.Add(48*time.Hour))
	ofOther := userLeaf(t, other, []string{"demo-client.ns.svc"}, nil, now.Add(-time.Hour), now.Add(time.Hour))

	for _, tc := range []struct {
		name               string
		server, op, peer   map[string][]byte
		wantSecret, wantIn string // "" wantSecret: usable
	}{
		{"cert-manager shape, one CA", server, op, peer, "", ""},
		{"peer only (client Disabled)", nil, nil, peer, "", ""},
		{"client only (peer Disabled)", server, op, nil, "", ""},
		{"server lacks ca.crt", with(server, CACertKey, nil), op, peer, "srv", "has no ca.crt"},
		{"operator Secret empty", server, map[string][]byte{}, peer, "op", "has no tls.crt, tls.key, ca.crt"},
		{"key of another certificate", with(server, PrivKeyKey, op[PrivKeyKey]), op, peer, "srv", "not a usable key pair"},
		{"ca.crt not PEM", server, op, with(peer, CACertKey, []byte("garbage")), "peer", "ca.crt holds no PEM certificate"},
		{"server expired", expired, op, peer, "srv", "expired at"},
		{"server not yet valid", future, op, peer, "srv", "not valid before"},
		{"server of another CA", with(ofOther, CACertKey, ca.CertPEM), op, peer, "srv", "no CA in that ca.crt signed it"},
		{"server without the client Service name", userLeaf(t, ca, []string{"*.demo-peer.ns.svc"}, nil, now.Add(-time.Hour), now.Add(time.Hour)), op, peer,
			"srv", "not valid for demo-client.ns.svc (it has *.demo-peer.ns.svc)"},
		{"server for server auth only (the gateway dials with it)", userLeaf(t, ca, []string{"demo-client.ns.svc"}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, now.Add(-time.Hour), now.Add(time.Hour)), op, peer,
			"srv", "does not allow client auth"},
		{"operator's ca.crt does not verify the server", server, with(op, CACertKey, other.CertPEM), peer, "srv", "ca.crt of Secret op"},
		{"operator certificate of another CA", server, with(userLeaf(t, other, nil, nil, now.Add(-time.Hour), now.Add(time.Hour)), CACertKey, ca.CertPEM), peer,
			"op", "members do not accept it"},
		{"operator certificate for server auth only", server, userLeaf(t, ca, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, now.Add(-time.Hour), now.Add(time.Hour)), peer,
			"op", "does not allow client auth"},
		{"per-member peer certificate", server, op, userLeaf(t, ca, []string{"demo-0.demo-peer.ns.svc"}, nil, now.Add(-time.Hour), now.Add(time.Hour)),
			"peer", "lacks the DNS name *.demo-peer.ns.svc and *.demo-peer.ns.svc.cluster.local"},
		{"peer without the cluster-domain wildcard (members check a caller's reverse DNS)", server, op, userLeaf(t, ca, []string{"*.demo-peer.ns.svc"}, nil, now.Add(-time.Hour), now.Add(time.Hour)),
			"peer", "lacks the DNS name *.demo-peer.ns.svc.cluster.local: "},
		{"peer for server auth only", server, op, userLeaf(t, ca, []string{"*.demo-peer.ns.svc", "*.demo-peer.ns.svc.cluster.local"}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, now.Add(-time.Hour), now.Add(time.Hour)),
			"peer", "does not allow client auth"},
		{"peer's ca.crt is another CA", server, op, with(peer, CACertKey, other.CertPEM), "peer", "no CA in that ca.crt signed it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in UserCertificates
			if tc.server != nil {
				in.Server = &UserSecret{"srv", tc.server}
			}
			if tc.op != nil {
				in.OperatorClient = &UserSecret{"op", tc.op}
			}
			if tc.peer != nil {
				in.Peer = &UserSecret{"peer", tc.peer}
			}
			err := CheckUserCertificates(in, names, now)
			if tc.wantSecret == "" {
				if err != nil {
					t.Fatalf("usable certificates refused: %v", err)
				}
				return
			}
			var p *UserProblem
			if !errors.As(err, &p) {
				t.Fatalf("got %v, want a problem with Secret %s", err, tc.wantSecret)
			}
			if p.Secret != tc.wantSecret || !strings.Contains(p.Problem, tc.wantIn) {
				t.Fatalf("got %q, want Secret %s and %q", err, tc.wantSecret, tc.wantIn)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatal("the message holds key material")
			}
		})
	}
}

func TestUserTrustFollowsCAsOnly(t *testing.T) {
	now := time.Now()
	ca, _, _ := NewCA("a", now)
	other, _, _ := NewCA("b", now)
	leaf := func() map[string][]byte {
		return userLeaf(t, ca, []string{"x"}, nil, now.Add(-time.Hour), now.Add(time.Hour))
	}
	in := UserCertificates{Server: &UserSecret{"s", leaf()}, Peer: &UserSecret{"p", leaf()}}
	renewed := UserCertificates{Server: &UserSecret{"s", leaf()}, Peer: &UserSecret{"p", leaf()}}
	if UserTrust(in) != UserTrust(renewed) {
		t.Error("a renewal under the same CA changed the trust fingerprint (it would restart every member)")
	}
	renewed.Peer.Data[CACertKey] = Bundle(ca, other)
	if UserTrust(in) == UserTrust(renewed) {
		t.Error("a new ca.crt left the trust fingerprint unchanged (members would keep the old trust)")
	}
}
