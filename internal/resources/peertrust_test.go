package resources

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// The peer-port and TLS flags MemberPod sets, given to a real etcd: only the peer certificate may
// speak the peer protocol; the users' and the operator's client certificates, signed by the same CA,
// are refused in the handshake; TLS below 1.2 and TLS 1.2 without an AEAD suite are refused.
func TestPeerPortRefusesClientCertificatesAndWeakTLS(t *testing.T) {
	c := sample()
	pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd", InitialCluster: []string{"demo-0"}, Bootstrap: true})
	if arg(pod, "--peer-client-cert-auth") != "true" || arg(pod, "--peer-cert-allowed-cn") == "" {
		t.Fatalf("peer port without client-certificate checks: %v", pod.Spec.Containers[0].Args)
	}
	now := time.Now()
	ca, caData, err := pki.NewCA("test", now)
	if err != nil {
		t.Fatal(err)
	}
	// The same names and usages as the operator issues (controllers' ensureTLS), plus 127.0.0.1: etcd
	// checks that a peer's certificate names the address it connects from (in a cluster, the pod IP
	// resolves back into the peer Service's wildcard).
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	issue := func(cn string, dns []string, usage pki.Usage) map[string][]byte {
		d, err := ca.Issue(cn, dns, loopback, usage, now)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	peer := issue(naming.PeerCommonName(c.Name), PeerDNSNames(c), pki.ServerAndClient)
	user := issue(c.Name+"-client", nil, pki.ClientOnly)
	operator := issue("etcd-autopilot-operator", nil, pki.ClientOnly)
	server := issue(c.Name+"-server", ServerDNSNames(c), pki.ServerAndClient)

	info := etcdtest.TLSFiles(t, peer)
	info.AllowedCNs = []string{arg(pod, "--peer-cert-allowed-cn")}
	m := etcdtest.StartPeerTLSMember(t, info, func(cfg *embed.Config) {
		cfg.TlsMinVersion = arg(pod, "--tls-min-version")
		cfg.CipherSuites = strings.Split(arg(pod, "--cipher-suites"), ",")
	})

	get := func(data map[string][]byte, tune func(*tls.Config)) error {
		return peerGet(t, c, m.PeerURL, caData[pki.CACertKey], data, tune)
	}

	if err := get(peer, nil); err != nil {
		t.Fatalf("the peer certificate was refused on the peer port: %v", err)
	}
	for name, data := range map[string]map[string][]byte{"user client": user, "operator client": operator, "server": server} {
		err := get(data, nil)
		if err == nil || !strings.Contains(err.Error(), "bad certificate") {
			t.Errorf("the %s certificate on the peer port: want a refused handshake, got %v", name, err)
		}
	}
	if err := get(peer, func(cfg *tls.Config) { cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 }); err == nil {
		t.Error("TLS 1.1 was accepted")
	}
	if err := get(peer, func(cfg *tls.Config) {
		cfg.MaxVersion, cfg.CipherSuites = tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
	}); err == nil {
		t.Error("TLS 1.2 with a CBC suite was accepted")
	}
	if err := get(peer, func(cfg *tls.Config) { cfg.MaxVersion, cfg.CipherSuites = tls.VersionTLS12, pki.CipherSuites() }); err != nil {
		t.Errorf("TLS 1.2 with the operator's own suites was refused: %v", err)
	}
}

// peerGet reads /members from a member's peer URL with the key pair in data, trusting roots.
func peerGet(t *testing.T, c *etcdv1alpha1.EtcdCluster, peerURL string, rootsPEM []byte, data map[string][]byte, tune func(*tls.Config)) error {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootsPEM)
	pair, err := tls.X509KeyPair(data[pki.CertKey], data[pki.PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "demo-0." + naming.PeerService(c.Name) + "." + c.Namespace + ".svc"}
	if tune != nil {
		tune(cfg)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(peerURL + "/members")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /members with a handshake that passed: %s", resp.Status)
	}
	return nil
}

// With user-provided certificates the CN is the user's, so the peer port checks a name instead: a
// client certificate of the same CA (as one cert-manager Issuer signs all of them) is refused there,
// the user's peer certificate (the peer wildcards, as checkUserTLS requires) is accepted.
func TestUserPeerPortRefusesClientCertificatesOfTheSameCA(t *testing.T) {
	c := sample()
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "my-server", OperatorClient: "my-operator", Peer: "my-peer"}}
	pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd", InitialCluster: []string{"demo-0"}, Bootstrap: true})
	if arg(pod, "--peer-cert-allowed-hostname") == "" || arg(pod, "--peer-cert-allowed-cn") != "" {
		t.Fatalf("user peer certificates: want the name check and no CN check: %v", pod.Spec.Containers[0].Args)
	}
	now := time.Now()
	ca, caData, err := pki.NewCA("cert-manager issuer", now)
	if err != nil {
		t.Fatal(err)
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)} // see TestPeerPortRefusesClientCertificatesAndWeakTLS
	issue := func(cn string, dns []string, usage pki.Usage) map[string][]byte {
		d, err := ca.Issue(cn, dns, loopback, usage, now)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	peer := issue("anything", PeerDNSNames(c), pki.ServerAndClient)
	info := etcdtest.TLSFiles(t, peer)
	info.AllowedHostnames = []string{arg(pod, "--peer-cert-allowed-hostname")}
	m := etcdtest.StartPeerTLSMember(t, info, nil)
	if err := peerGet(t, c, m.PeerURL, caData[pki.CACertKey], peer, nil); err != nil {
		t.Fatalf("the user's peer certificate was refused on the peer port: %v", err)
	}
	for name, data := range map[string]map[string][]byte{
		"user client":                        issue("app", nil, pki.ClientOnly),
		"client named like the peer service": issue("demo-peer", []string{"demo-client.ns.svc"}, pki.ServerAndClient),
	} {
		if err := peerGet(t, c, m.PeerURL, caData[pki.CACertKey], data, nil); err == nil || !strings.Contains(err.Error(), "bad certificate") {
			t.Errorf("the %s certificate on the peer port: want a refused handshake, got %v", name, err)
		}
	}
}
