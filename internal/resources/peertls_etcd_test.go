package resources

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
)

// The peer TLS move of a take-over, on real etcd: members configured with peer TLS and listening in
// plain text as well join a plain-text member under plain-text URLs, the plain-text member leaves,
// each member's URL moves to TLS one at a time with the cluster writable after each move, and a
// member then restarts without its plain-text listener and still takes part.
func TestPeerURLsMoveToTLSOnRealEtcd(t *testing.T) {
	c := sample()
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: []string{"http://old:2379"}}}
	pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd", InitialCluster: []string{"demo-0"}})
	if !strings.Contains(arg(pod, "--listen-peer-urls"), "https://") || !strings.Contains(arg(pod, "--listen-peer-urls"), ",http://") {
		t.Fatalf("a member joining a plain-text cluster into peer TLS listens on %s", arg(pod, "--listen-peer-urls"))
	}
	now := time.Now()
	ca, _, err := pki.NewCA("test", now)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ca.Issue(naming.PeerCommonName(c.Name), PeerDNSNames(c), []net.IP{net.IPv4(127, 0, 0, 1)}, pki.ServerAndClient, now)
	if err != nil {
		t.Fatal(err)
	}
	info := etcdtest.TLSFiles(t, peer)
	info.AllowedCNs = []string{arg(pod, "--peer-cert-allowed-cn")}

	old := etcdtest.StartCluster(t, 1)[0]
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{old.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type joined struct {
		m         *etcdtest.Member
		id        uint64
		tlsURL    string
		plainPeer string
	}
	urls := func(raw ...string) []url.URL {
		var out []url.URL
		for _, r := range raw {
			u, _ := url.Parse(r)
			out = append(out, *u)
		}
		return out
	}
	initial := []string{old.Name + "=" + old.PeerURL}
	var ours []joined
	for _, name := range []string{"a", "b"} {
		j := joined{m: etcdtest.NewMemberURLs(t, name), tlsURL: "https://" + loopback.FreeAddr(t)}
		j.plainPeer = j.m.PeerURL
		j.m.PeerTLS = &info
		j.m.Configure(func(cfg *embed.Config) {
			cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls(j.tlsURL, j.plainPeer), urls(j.plainPeer)
		})
		// etcd refuses a new member until every voter has been connected for a while (strict checks).
		waitFor(t, ctx, "add "+name, func() error {
			added, err := cl.MemberAddAsLearner(ctx, []string{j.plainPeer})
			if err == nil {
				j.id = added.Member.ID
			}
			return err
		})
		initial = append(initial, name+"="+j.plainPeer)
		etcdtest.Join(t, j.m, initial)
		waitFor(t, ctx, "promote "+name, func() error { _, err := cl.MemberPromote(ctx, j.id); return err })
		ours = append(ours, j)
	}
	cl.SetEndpoints(etcdtest.ClientURLs([]*etcdtest.Member{ours[0].m, ours[1].m})...)
	lr, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range lr.Members {
		if m.Name == old.Name {
			waitFor(t, ctx, "remove "+m.Name, func() error { _, err := cl.MemberRemove(ctx, m.ID); return err })
		}
	}
	writable := func(step string) {
		t.Helper()
		for _, j := range ours {
			one, err := clientv3.New(clientv3.Config{Endpoints: []string{j.m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, step+": put through "+j.m.Name, func() error { _, err := one.Put(ctx, "/k/"+step, step); return err })
			_ = one.Close()
		}
	}
	writable("plain")
	for _, j := range ours {
		waitFor(t, ctx, "update "+j.m.Name, func() error { _, err := cl.MemberUpdate(ctx, j.id, []string{j.tlsURL}); return err })
		writable("moved-" + j.m.Name)
	}
	// The roll out of the plain-text listener.
	a := ours[0]
	a.m.PeerURL = a.tlsURL
	a.m.Restart(t, func(cfg *embed.Config) { cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls(a.tlsURL), urls(a.tlsURL) })
	writable("secured")
	lr, err = cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range lr.Members {
		if len(m.PeerURLs) != 1 || !strings.HasPrefix(m.PeerURLs[0], "https://") {
			t.Fatalf("member %s has peer URLs %v", m.Name, m.PeerURLs)
		}
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	var err error
	for ctx.Err() == nil {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}
