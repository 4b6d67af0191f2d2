package planner

import (
	"fmt"
	"slices"
	"sort"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// PeerTLSMove is the move of the members' peer URLs from plain text to TLS after a take-over from a
// plain-text cluster (status.migration.peerTLS). The members listen for peers in TLS and in plain
// text from the start; only the URL each advertises moves, one member at a time.
type PeerTLSMove struct {
	// Phase is the recorded phase: Plain (nothing moved yet) or Updating (a URL may have moved).
	Phase string
	// Want is the TLS peer URL of member name.
	Want func(name string) string
	// FromTLS: the old members talked TLS to each other, so the members joined over TLS and only
	// the peer certificate check is left to turn on (at SecurePeers).
	FromTLS bool
}

const (
	// StartPeerTLS records that peer URLs move to TLS, before the first is moved.
	StartPeerTLS Kind = "StartPeerTLS"
	// UpdatePeerURLs changes one member's peer URL (Members[0], ID) to its TLS URL.
	UpdatePeerURLs Kind = "UpdatePeerURLs"
	// SecurePeers records that every peer URL is TLS: the members are then restarted, one at a time
	// (a new ConfigHash), without their plain-text peer listener.
	SecurePeers Kind = "SecurePeers"
)

// decidePeerTLS moves the peer URLs to TLS one member at a time, with every member healthy before
// each move (the caller has checked), followers first and the leader last: a moved member's
// peers reconnect to it, which the leader's heartbeats should not depend on while others move.
func decidePeerTLS(in Input, e *Etcd) (Action, bool) {
	mv := in.PeerTLS
	if mv == nil {
		return Action{}, false
	}
	var plain []EtcdMember
	for _, m := range e.Members {
		if want := mv.Want(m.Name); len(m.PeerURLs) != 1 || m.PeerURLs[0] != want {
			plain = append(plain, m)
		}
	}
	if len(plain) == 0 {
		if mv.FromTLS {
			return Action{Kind: SecurePeers, Reason: reason.SecuringPeers, Message: "the old members are gone; restarting the members one at a time to accept only peer certificates of this cluster's peer name"}, true
		}
		return Action{Kind: SecurePeers, Reason: reason.SecuringPeers, Message: "every member's peer URL is TLS; restarting the members one at a time without their plain-text peer listener"}, true
	}
	if mv.Phase != "Updating" {
		return Action{Kind: StartPeerTLS, Reason: reason.SecuringPeers, Message: fmt.Sprintf("the old members are gone; moving the peer URLs of %d members to TLS, one at a time", len(plain))}, true
	}
	sort.SliceStable(plain, func(i, j int) bool {
		li, lj := plain[i].ID == e.LeaderID, plain[j].ID == e.LeaderID
		if li != lj {
			return lj
		}
		return plain[i].Name < plain[j].Name
	})
	m := plain[0]
	done := len(e.Members) - len(plain)
	return Action{Kind: UpdatePeerURLs, Members: []string{m.Name}, ID: m.ID, Reason: reason.SecuringPeers,
		Message: fmt.Sprintf("moving the peer URL of %s from %s to %s (%d of %d members moved)", m.Name, slices.Concat(m.PeerURLs), mv.Want(m.Name), done, len(e.Members))}, true
}
