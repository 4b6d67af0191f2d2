// Package etcdtest runs real etcd servers in-process (go.etcd.io/etcd/server/v3/embed) for tests.
package etcdtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
)

// Member is one running embedded etcd.
type Member struct {
	Name      string
	PeerURL   string
	ClientURL string
	Etcd      *embed.Etcd
	// ClientTLS, when set before start, serves clients over TLS and requires client certificates.
	ClientTLS *transport.TLSInfo
	// PeerTLS, when set before start, serves the peer port over TLS.
	PeerTLS   *transport.TLSInfo
	configure func(*embed.Config)
	dir       string
	stop      *sync.Once
}

// Configure sets what is applied to the member's configuration before it starts (e.g. listeners of
// its own); call before Join.
func (m *Member) Configure(configure func(*embed.Config)) { m.configure = configure }

// Stop stops the member (idempotent: embed.Etcd.Close panics when called twice).
func (m *Member) Stop() { m.stop.Do(m.Etcd.Close) }

// Restart starts a stopped member again on its data, with configure applied on top of its
// configuration (e.g. ForceNewCluster).
func (m *Member) Restart(t testing.TB, configure func(*embed.Config)) {
	t.Helper()
	m.Stop()
	prev := m.configure
	m.configure = func(cfg *embed.Config) {
		if prev != nil {
			prev(cfg)
		}
		if configure != nil {
			configure(cfg)
		}
	}
	if err := m.start(t, m.Name+"="+m.PeerURL, embed.ClusterStateFlagExisting); err != nil {
		t.Fatal(err)
	}
}

// freeURL returns an http URL on a free loopback port.
func freeURL(t testing.TB) string {
	t.Helper()
	return "http://" + loopback.FreeAddr(t)
}

// NewMemberURLs picks free peer and client URLs for a member that will be started later.
func NewMemberURLs(t testing.TB, name string) *Member {
	return &Member{Name: name, PeerURL: freeURL(t), ClientURL: freeURL(t)}
}

// StartTLSMember starts a single-member cluster whose client port requires TLS with tlsInfo.
func StartTLSMember(t testing.TB, tlsInfo transport.TLSInfo) *Member {
	t.Helper()
	m := NewMemberURLs(t, "tls0")
	m.ClientTLS = &tlsInfo
	if err := m.start(t, m.Name+"="+m.PeerURL, embed.ClusterStateFlagNew); err != nil {
		t.Fatal(err)
	}
	return m
}

// StartPeerTLSMember starts a single-member cluster whose peer port is served over TLS with
// peerInfo, with configure (may be nil) applied before it starts.
func StartPeerTLSMember(t testing.TB, peerInfo transport.TLSInfo, configure func(*embed.Config)) *Member {
	t.Helper()
	m := NewMemberURLs(t, "peertls0")
	m.PeerURL = "https" + strings.TrimPrefix(m.PeerURL, "http")
	m.PeerTLS, m.configure = &peerInfo, configure
	if err := m.start(t, m.Name+"="+m.PeerURL, embed.ClusterStateFlagNew); err != nil {
		t.Fatal(err)
	}
	return m
}

// StartTLSEverywhereMember starts a single-member cluster that requires TLS with client
// certificates on its client port (clientInfo) and its peer port (peerInfo), as a cluster run with
// its own CA does.
func StartTLSEverywhereMember(t testing.TB, clientInfo, peerInfo transport.TLSInfo) *Member {
	t.Helper()
	m := NewMemberURLs(t, "tlsall0")
	m.PeerURL = "https" + strings.TrimPrefix(m.PeerURL, "http")
	m.ClientTLS, m.PeerTLS = &clientInfo, &peerInfo
	if err := m.start(t, m.Name+"="+m.PeerURL, embed.ClusterStateFlagNew); err != nil {
		t.Fatal(err)
	}
	return m
}

// TLSFiles writes a leaf's Secret data (tls.crt, tls.key, ca.crt, as internal/pki issues it) to files
// and returns the TLS configuration of an etcd listener that serves it and requires client certificates
// from that CA.
func TLSFiles(t testing.TB, leaf map[string][]byte) transport.TLSInfo {
	t.Helper()
	dir := t.TempDir()
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, leaf[name], 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return transport.TLSInfo{CertFile: write(pki.CertKey), KeyFile: write(pki.PrivKeyKey), TrustedCAFile: write(pki.CACertKey), ClientCertAuth: true}
}

// StartCluster starts n members that bootstrap together, and stops them when the test ends.
func StartCluster(t testing.TB, n int) []*Member {
	t.Helper()
	return StartClusterWith(t, n, nil)
}

// StartClusterWith is StartCluster with configure applied to each member's configuration before
// it starts (e.g. a tiny QuotaBackendBytes to raise NOSPACE); configure may be nil.
func StartClusterWith(t testing.TB, n int, configure func(*embed.Config)) []*Member {
	t.Helper()
	ms := make([]*Member, n)
	for i := range ms {
		ms[i] = NewMemberURLs(t, fmt.Sprintf("m%d", i))
	}
	StartMembers(t, ms, configure)
	return ms
}

// StartMembers bootstraps ms together, with the names and URLs the caller gave them (e.g. client
// URLs on the pod IPs of a test's member pods), and stops them when the test ends.
func StartMembers(t testing.TB, ms []*Member, configure func(*embed.Config)) {
	t.Helper()
	n := len(ms)
	var initial []string
	for _, m := range ms {
		own := m.configure // a member's own (Configure), then the one for all
		m.configure = func(cfg *embed.Config) {
			if own != nil {
				own(cfg)
			}
			if configure != nil {
				configure(cfg)
			}
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	errs := make(chan error, n)
	for _, m := range ms {
		go func(m *Member) { errs <- m.start(t, strings.Join(initial, ","), embed.ClusterStateFlagNew) }(m)
	}
	for range ms {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Join starts m as a member of an existing cluster whose initial-cluster list is initial
// (it must include m). The member must already have been added (e.g. as a learner).
func Join(t testing.TB, m *Member, initial []string) {
	t.Helper()
	if err := m.start(t, strings.Join(initial, ","), embed.ClusterStateFlagExisting); err != nil {
		t.Fatal(err)
	}
}

func (m *Member) start(t testing.TB, initialCluster, state string) error {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	if m.dir == "" {
		m.dir = t.TempDir()
	}
	cfg.Dir = m.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.InitialCluster = initialCluster
	cfg.ClusterState = state
	cfg.InitialClusterToken = "etcdtest"
	pu, _ := url.Parse(m.PeerURL)
	cu, _ := url.Parse(m.ClientURL)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	if m.PeerTLS != nil {
		cfg.PeerTLSInfo = *m.PeerTLS
	}
	if m.ClientTLS != nil {
		cu.Scheme = "https"
		m.ClientURL = cu.String()
		cfg.ClientTLSInfo = *m.ClientTLS
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.TickMs, cfg.ElectionMs = 50, 500
	if m.configure != nil {
		m.configure(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd %s: %w", m.Name, err)
	}
	m.Etcd, m.stop = e, &sync.Once{}
	t.Cleanup(m.Stop)
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd %s failed: %w", m.Name, err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("etcd %s not ready after 30s", m.Name)
	}
}

// ClientURLs of ms.
func ClientURLs(ms []*Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ClientURL
	}
	return out
}

// EnableAuth turns authentication on in the cluster cl reaches, with a root user: from then on etcd
// answers no call of a client without a user.
func EnableAuth(t testing.TB, cl *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	if _, err := cl.UserAdd(ctx, "root", "secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
}

// ServeRestored starts member m (its name and URLs as it was restored with, token "restored") on a
// data directory a snapshot restore made, and returns a client of it; both end with the test.
func ServeRestored(t testing.TB, m *Member, dataDir string) *clientv3.Client {
	t.Helper()
	ec := embed.NewConfig()
	ec.Name, ec.Dir = m.Name, dataDir
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	ec.InitialCluster, ec.InitialClusterToken = m.Name+"="+m.PeerURL, "restored"
	pu, _ := url.Parse(m.PeerURL)
	cu, _ := url.Parse(m.ClientURL)
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("restored etcd not ready")
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}
