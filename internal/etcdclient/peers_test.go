package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// A member's metrics tell which peers it reaches, and how far they are: all of them in a healthy cluster, and not a
// stopped one once raft noticed, while the others stay active.
func TestPeerActivityFollowsRaftConnections(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 3)
	c, err := New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ids := map[string]uint64{}
	members, _, err := c.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		ids[m.Name] = m.ID
	}
	// embed serves /metrics on the client URL too; the pods use --listen-metrics-urls.
	observer := ms[0].ClientURL + "/metrics"
	waitFor(t, func() (bool, string) {
		act, err := PeerActivity(ctx, observer, ids["m0"])
		return err == nil && act[ids["m1"]] && act[ids["m2"]] && len(act) == 2, fmt.Sprint(act, err)
	})

	// The same members measure their round-trip times to each other (the prober's first reading
	// comes 5 s after a peer connects); embedded members share one registry, so the reading holds
	// every member's peers.
	waitFor(t, func() (bool, string) {
		rtt, err := ReadPeerRTT(ctx, observer)
		h := rtt[strconv.FormatUint(ids["m1"], 16)]
		return err == nil && h.Count > 0 && h.Quantile(0.99) < 1, fmt.Sprint(rtt, err)
	})

	ms[2].Stop()
	waitFor(t, func() (bool, string) {
		act, err := PeerActivity(ctx, observer, ids["m0"])
		return err == nil && act[ids["m1"]] && !act[ids["m2"]], fmt.Sprint(act, err)
	})

	if _, err := PeerActivity(ctx, ms[2].ClientURL+"/metrics", ids["m2"]); err == nil {
		t.Fatal("PeerActivity of a stopped member succeeded")
	}
}

func waitFor(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 30s; last: %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A member that accepts connections but never answers (stopping, its process hung) costs a pass one
// short scrape, not a full call timeout: the pass that must act on its loss waits behind it.
func TestScrapeOfAMemberThatDoesNotAnswerGivesUpAtItsTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		var held []net.Conn // open, never answered; closed once the listener is
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	start := time.Now()
	_, err = PeerActivity(context.Background(), "http://"+l.Addr().String()+"/metrics", 1)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PeerActivity of a silent member: %v, want a deadline error", err)
	}
	if took < memberTimeout || took >= callTimeout {
		t.Fatalf("gave up after %s, want the member timeout %s (not the call timeout %s)", took, memberTimeout, callTimeout)
	}
}
