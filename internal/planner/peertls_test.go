package planner

import (
	"strings"
	"testing"
)

func tlsURL(name string) string   { return "https://" + name + ".c-peer.ns.svc:2380" }
func plainURL(name string) string { return "http://" + name + ".c-peer.ns.svc:2381" }

// migratedPlain is a 3-member cluster just taken over from a plain-text one (c-0 leading): every
// member advertises its plain-text peer URL, the move to TLS in phase.
func migratedPlain(phase string) Input {
	return with(healthyCluster(3), func(in *Input) {
		in.PeerTLS = &PeerTLSMove{Phase: phase, Want: tlsURL}
		for i := range in.Etcd.Members {
			in.Etcd.Members[i].PeerURLs = []string{plainURL(in.Etcd.Members[i].Name)}
		}
	})
}

func moved(in *Input, names ...string) {
	for _, n := range names {
		member(in, n).PeerURLs = []string{tlsURL(n)}
	}
}

func TestDecidePeerTLS(t *testing.T) {
	cases := []decideCase{
		{name: "recorded before the first URL moves", in: migratedPlain("Plain"), kind: StartPeerTLS, reason: "SecuringPeers"},
		{name: "followers first", in: migratedPlain("Updating"), kind: UpdatePeerURLs, members: []string{"c-1"}, id: 2, reason: "SecuringPeers"},
		{name: "one at a time, in order", in: with(migratedPlain("Updating"), func(in *Input) { moved(in, "c-1") }), kind: UpdatePeerURLs, members: []string{"c-2"}, id: 3},
		{name: "the leader last", in: with(migratedPlain("Updating"), func(in *Input) { moved(in, "c-1", "c-2") }), kind: UpdatePeerURLs, members: []string{"c-0"}, id: 1},
		{name: "all moved: recorded, then the plain listener goes", in: with(migratedPlain("Updating"), func(in *Input) { moved(in, "c-0", "c-1", "c-2") }), kind: SecurePeers},
		{name: "a crash after every move but before the record", in: with(migratedPlain("Plain"), func(in *Input) { moved(in, "c-0", "c-1", "c-2") }), kind: SecurePeers},
		{name: "a member with two URLs is moved to the one", in: with(migratedPlain("Updating"), func(in *Input) {
			moved(in, "c-0", "c-2")
			member(in, "c-1").PeerURLs = []string{plainURL("c-1"), tlsURL("c-1")}
		}), kind: UpdatePeerURLs, members: []string{"c-1"}, id: 2},
		{name: "no move while a member is unhealthy", in: with(migratedPlain("Updating"), func(in *Input) { member(in, "c-2").Healthy = false }), kind: Wait, reason: "WaitingForHealth"},
		{name: "no move while a learner catches up", in: with(migratedPlain("Updating"), func(in *Input) { member(in, "c-2").Learner = true; member(in, "c-2").Healthy = false }), kind: Wait},
		{name: "the missing member is added first", in: with(migratedPlain("Updating"), func(in *Input) { in.Replicas = 4 }), kind: AddLearner, members: []string{"c-3"}},
		{name: "nothing to move without a take-over", in: healthyCluster(3), kind: None},
		{name: "taken over from TLS peers: only the peer check is left", in: with(migratedPlain("Updating"), func(in *Input) {
			moved(in, "c-0", "c-1", "c-2")
			in.PeerTLS.FromTLS = true
		}), kind: SecurePeers, reason: "SecuringPeers"},
	}
	runDecideCases(t, cases)
	fromTLS := Decide(with(migratedPlain("Updating"), func(in *Input) {
		moved(in, "c-0", "c-1", "c-2")
		in.PeerTLS.FromTLS = true
	}))
	if !strings.Contains(fromTLS.Message, "accept only peer certificates") {
		t.Errorf("after a take-over from TLS peers: %q", fromTLS.Message)
	}
}

// TestPeerTLSWalk moves every URL, one decided step at a time: each step leaves every other member's
// URL as it was, and the walk ends with SecurePeers once all are TLS.
func TestPeerTLSWalk(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		in := with(healthyCluster(n), func(in *Input) {
			in.PeerTLS = &PeerTLSMove{Phase: "Plain", Want: tlsURL}
			for i := range in.Etcd.Members {
				in.Etcd.Members[i].PeerURLs = []string{plainURL(in.Etcd.Members[i].Name)}
			}
		})
		updates := 0
		for step := 0; ; step++ {
			if step > 20 {
				t.Fatalf("%d members: the move does not end", n)
			}
			a := Decide(in)
			switch a.Kind {
			case StartPeerTLS:
				in.PeerTLS.Phase = "Updating"
			case UpdatePeerURLs:
				if in.PeerTLS.Phase != "Updating" {
					t.Fatalf("%d members: a URL moved before the move was recorded", n)
				}
				m := member(&in, a.Members[0])
				if m.PeerURLs[0] == tlsURL(m.Name) {
					t.Fatalf("%d members: %s moved twice", n, m.Name)
				}
				m.PeerURLs = []string{tlsURL(m.Name)}
				updates++
			case SecurePeers:
				if updates != n {
					t.Fatalf("%d members: secured after %d moves", n, updates)
				}
				return
			default:
				t.Fatalf("%d members, step %d: unexpected %s (%s)", n, step, a.Kind, a.Message)
			}
		}
	}
}
