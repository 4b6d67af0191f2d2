package resources

import (
	"slices"
	"strings"
	"testing"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

func migratingSample() *etcdv1alpha1.EtcdCluster {
	c := sample()
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: []string{"http://old-0.old:2379"}}}
	return c
}

// A member joining a cluster being taken over lists the old members in --initial-cluster, after the
// operator's own, as etcd wants the whole member list.
func TestJoiningMemberNamesTheOldMembers(t *testing.T) {
	c := migratingSample()
	pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}, OtherPeers: []string{"old-0=http://old-0.old:2380", "old-1=http://old-1.old:2380"}})
	want := "--initial-cluster=demo-0=" + naming.PeerURL(c.Name, c.Namespace, "demo-0", false) + ",old-0=http://old-0.old:2380,old-1=http://old-1.old:2380"
	if args := pod.Spec.Containers[0].Args; !slices.Contains(args, want) || !slices.Contains(args, "--initial-cluster-state=existing") {
		t.Fatalf("args %v lack %s and state existing", args, want)
	}
}

// While old members replicate to the new ones, the peer port accepts them (their labels are
// unknown); once migrated, only the cluster's own members again.
func TestPeerPortOpenOnlyWhileMigrating(t *testing.T) {
	c := migratingSample()
	if !Migrating(c) {
		t.Fatal("a cluster with migrateFrom and no recorded end is migrating")
	}
	if from := NetworkPolicy(c, "").Spec.Ingress[0].From; from != nil {
		t.Fatalf("peer port restricted to %v while migrating", from)
	}
	c.Status.Migration = &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete}
	if Migrating(c) {
		t.Fatal("a completed migration is still migrating")
	}
	if from := NetworkPolicy(c, "").Spec.Ingress[0].From; len(from) != 1 || from[0].PodSelector == nil {
		t.Fatalf("peer port open to %v after the migration", from)
	}
	if Migrating(sample()) {
		t.Fatal("a cluster without migrateFrom is migrating")
	}
}

func argWith(args []string, prefix string) string {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return a
		}
	}
	return ""
}

// A take-over into peer TLS: members join advertising a plain-text URL on PlainPeerPort and serve
// TLS on PeerPort from the start, so their URLs can move to TLS one at a time; once all have moved
// (Secured) they are rolled, with a new ConfigHash, out of the plain-text listener, and the
// NetworkPolicy closes its port.
func TestTakeOverIntoPeerTLS(t *testing.T) {
	c := migratingSample()
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged}
	plain, tls := naming.PlainPeerURL(c.Name, c.Namespace, "demo-1"), naming.PeerURL(c.Name, c.Namespace, "demo-1", true)
	if !strings.HasPrefix(plain, "http://") || !strings.HasSuffix(plain, ":2381") {
		t.Fatalf("plain-text peer URL %s", plain)
	}
	peerPorts := func() []int32 {
		var out []int32
		for _, p := range NetworkPolicy(c, "").Spec.Ingress[0].Ports {
			out = append(out, p.Port.IntVal)
		}
		return out
	}
	join := MemberPodInput{Member: "demo-1", Image: "i", InitialCluster: []string{"demo-0", "demo-1"}, PeerURLs: map[string]string{"demo-0": "https://demo-0.x:2380"}}
	steps := []struct {
		name              string
		migration         *etcdv1alpha1.Migration
		advertise, listen string
		demo1InInitial    string
		ports             []int32
	}{
		{"before the start", nil, plain, "--listen-peer-urls=https://0.0.0.0:2380,http://0.0.0.0:2381", plain, []int32{2380, 2381}},
		{"joining", &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationJoining, PeerTLS: etcdv1alpha1.PeerTLSPlain}, plain, "--listen-peer-urls=https://0.0.0.0:2380,http://0.0.0.0:2381", plain, []int32{2380, 2381}},
		{"migrated, URLs moving", &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, PeerTLS: etcdv1alpha1.PeerTLSUpdating}, tls, "--listen-peer-urls=https://0.0.0.0:2380,http://0.0.0.0:2381", tls, []int32{2380, 2381}},
		{"secured", &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, PeerTLS: etcdv1alpha1.PeerTLSSecured}, tls, "--listen-peer-urls=https://0.0.0.0:2380", tls, []int32{2380}},
	}
	var hashes []string
	for _, s := range steps {
		c.Status.Migration = s.migration
		args := MemberPod(c, join).Spec.Containers[0].Args
		if got := argWith(args, "--initial-advertise-peer-urls="); got != "--initial-advertise-peer-urls="+s.advertise {
			t.Errorf("%s: %s, want %s", s.name, got, s.advertise)
		}
		if got := argWith(args, "--listen-peer-urls="); got != s.listen {
			t.Errorf("%s: %s, want %s", s.name, got, s.listen)
		}
		// The member list's URL for a member wins over the derived one (etcd refuses a join otherwise).
		if want := "--initial-cluster=demo-0=https://demo-0.x:2380,demo-1=" + s.demo1InInitial; argWith(args, "--initial-cluster=") != want {
			t.Errorf("%s: %s, want %s", s.name, argWith(args, "--initial-cluster="), want)
		}
		if argWith(args, "--peer-cert-file=") == "" {
			t.Errorf("%s: no peer certificate: %v", s.name, args)
		}
		if got := peerPorts(); !slices.Equal(got, s.ports) {
			t.Errorf("%s: peer ports %v, want %v", s.name, got, s.ports)
		}
		hashes = append(hashes, ConfigHash(c))
	}
	if hashes[0] != hashes[2] || hashes[2] == hashes[3] {
		t.Errorf("ConfigHash %v: must change only when the plain-text listener goes", hashes)
	}
	// Nothing of this for a cluster that does not take over one, or keeps plain-text peers.
	for _, other := range []*etcdv1alpha1.EtcdCluster{sample(), migratingSample()} {
		if PlainPeerListener(other) || JoinPlainPeer(other) {
			t.Errorf("%s with tls %+v has a plain-text peer listener", other.Name, other.Spec.TLS)
		}
	}
}

// A take-over of a cluster whose members talk TLS to each other (migrateFrom.caSecret): members
// join over TLS on the peer port only, without the peer common-name check the old members'
// certificates would fail, and are rolled (a new ConfigHash) into that check once Secured.
func TestTakeOverFromPeerTLS(t *testing.T) {
	c := migratingSample()
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged}
	c.Spec.Bootstrap.MigrateFrom.CASecret = "legacy-ca"
	tls := naming.PeerURL(c.Name, c.Namespace, "demo-1", true)
	old := []etcdv1alpha1.SourceMember{{ID: "65", Name: "old-0", PeerURLs: []string{"https://old-0.old-peer.ns.svc:2380"}}}
	join := MemberPodInput{Member: "demo-1", Image: "i", InitialCluster: []string{"old-0", "demo-1"}, PeerURLs: map[string]string{"old-0": "https://old-0.old-peer.ns.svc:2380"}}
	steps := []struct {
		name      string
		migration *etcdv1alpha1.Migration
		cnCheck   bool
	}{
		{"joining", &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationJoining, PeerTLS: etcdv1alpha1.PeerTLSUpdating, SourceMembers: old}, false},
		{"migrated", &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, PeerTLS: etcdv1alpha1.PeerTLSUpdating, SourceMembers: old}, false},
		{"secured", &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, PeerTLS: etcdv1alpha1.PeerTLSSecured, SourceMembers: old}, true},
	}
	var hashes []string
	for _, s := range steps {
		c.Status.Migration = s.migration
		args := MemberPod(c, join).Spec.Containers[0].Args
		if got := argWith(args, "--initial-advertise-peer-urls="); got != "--initial-advertise-peer-urls="+tls {
			t.Errorf("%s: %s, want %s", s.name, got, tls)
		}
		if got := argWith(args, "--listen-peer-urls="); got != "--listen-peer-urls=https://0.0.0.0:2380" {
			t.Errorf("%s: %s, want TLS on the peer port only", s.name, got)
		}
		if got := argWith(args, "--peer-cert-allowed-cn="); (got != "") != s.cnCheck {
			t.Errorf("%s: peer common-name check %q, want it %v", s.name, got, s.cnCheck)
		}
		if PlainPeerListener(c) || JoinPlainPeer(c) {
			t.Errorf("%s: a plain-text peer listener", s.name)
		}
		hashes = append(hashes, ConfigHash(c))
	}
	if hashes[0] != hashes[1] || hashes[1] == hashes[2] {
		t.Errorf("ConfigHash %v: must change only when the peer check is turned on", hashes)
	}
	// A cluster that never took one over hashes as before the check existed: nothing is rolled.
	plain := sample()
	if !PeerCommonNameCheck(plain) || !PeerCommonNameCheck(migratingSample()) {
		t.Error("the peer common-name check is off outside a take-over from TLS peers")
	}
}
