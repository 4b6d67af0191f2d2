package peerwait

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
)

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// Addresses from loopback.FreeAddr have nothing listening: connections to them are refused, as by a
// plugin that rejects an unadmitted source.

func TestEndsAtTheFirstPeerThatAccepts(t *testing.T) {
	up := listen(t, "127.0.0.1:0").Addr().String()
	got := Wait(context.Background(), []string{loopback.FreeAddr(t), up}, 10*time.Second, 50*time.Millisecond)
	if got != up {
		t.Fatalf("Wait = %q, want %q", got, up)
	}
}

// The restarted member's case: refused until the peers admit it, then accepted.
func TestWaitsUntilAPeerStartsAccepting(t *testing.T) {
	addr := loopback.FreeAddr(t)
	admitted := make(chan struct{})
	go func() {
		time.Sleep(400 * time.Millisecond)
		listen(t, addr)
		close(admitted)
	}()
	start := time.Now()
	got := Wait(context.Background(), []string{addr}, 10*time.Second, 50*time.Millisecond)
	<-admitted
	if got != addr {
		t.Fatalf("Wait = %q, want %q", got, addr)
	}
	if took := time.Since(start); took < 400*time.Millisecond || took > 5*time.Second {
		t.Fatalf("returned after %s: before the peer listened, or long after", took)
	}
}

// Every peer down (a full outage): the member must start anyway once the limit has passed.
func TestGivesUpAtTheLimit(t *testing.T) {
	start := time.Now()
	if got := Wait(context.Background(), []string{loopback.FreeAddr(t), loopback.FreeAddr(t)}, 300*time.Millisecond, 50*time.Millisecond); got != "" {
		t.Fatalf("Wait = %q, want none", got)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Fatalf("gave up after %s, want the 300ms limit", took)
	}
}

func TestMainAlwaysStartsTheCommand(t *testing.T) {
	var out bytes.Buffer
	cmd, err := Main(context.Background(), []string{"--limit=200ms", loopback.FreeAddr(t), "--", "/usr/local/bin/etcd", "--name=m-1"}, &out)
	if err != nil || !slices.Equal(cmd, []string{"/usr/local/bin/etcd", "--name=m-1"}) {
		t.Fatalf("Main = %v, %v", cmd, err)
	}
	if !strings.Contains(out.String(), "starting anyway") {
		t.Fatalf("output %q does not say it gave up", out.String())
	}
	out.Reset()
	up := listen(t, "127.0.0.1:0").Addr().String()
	if cmd, err := Main(context.Background(), []string{up, "--", "etcd"}, &out); err != nil || len(cmd) != 1 || !strings.Contains(out.String(), "peer "+up+" accepts") {
		t.Fatalf("Main = %v, %v, output %q", cmd, err, out.String())
	}
	for _, bad := range [][]string{nil, {up}, {up, "--"}, {"--", "etcd"}} {
		if _, err := Main(context.Background(), bad, &out); err == nil {
			t.Errorf("Main(%q) succeeded", bad)
		}
	}
}

// A pod deleted during the wait must not start etcd on its way out.
func TestMainStartsNothingWhenStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if cmd, err := Main(ctx, []string{loopback.FreeAddr(t), "--", "etcd"}, &bytes.Buffer{}); err != nil || cmd != nil {
		t.Fatalf("Main = %v, %v; want nothing to run", cmd, err)
	}
}

// Members that all wait at once (a bootstrap) stand in for each other's etcd: each sees the other
// accept it well before the limit, instead of both waiting it out. After Main, "etcd" binds the port
// the stand-in held, as the exec'd etcd does.
func TestMembersWaitingForEachOtherStartAtOnce(t *testing.T) {
	a, b := loopback.FreeAddr(t), loopback.FreeAddr(t)
	start := time.Now()
	done := make(chan error, 2)
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		go func() {
			cmd, _ := Main(context.Background(), []string{"--limit=10s", "--listen=" + pair[0], pair[1], "--", "etcd"}, io.Discard)
			if !slices.Equal(cmd, []string{"etcd"}) {
				done <- fmt.Errorf("Main = %v, want etcd", cmd)
				return
			}
			etcd, err := net.Listen("tcp", pair[0]) // the stand-in is gone: the port is free
			if err == nil {
				t.Cleanup(func() { _ = etcd.Close() })
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("both started after %s: they waited for each other's limit", took)
	}
}

// A staggered member keeps standing in for its turn after a peer accepted it: a peer that starts its
// etcd meanwhile finds the port answering at once, not an etcd that holds its connection.
func TestStaggerKeepsStandingInBeforeTheCommand(t *testing.T) {
	up := listen(t, "127.0.0.1:0").Addr().String()
	own := loopback.FreeAddr(t)
	const stagger = 400 * time.Millisecond
	start := time.Now()
	done := make(chan []string, 1)
	go func() {
		cmd, _ := Main(context.Background(), []string{"--listen=" + own, "--stagger=" + stagger.String(), up, "--", "etcd"}, io.Discard)
		done <- cmd
	}()
	time.Sleep(stagger / 2)
	conn, err := net.DialTimeout("tcp", own, time.Second)
	if err != nil {
		t.Fatalf("nothing stands in on %s during the stagger: %v", own, err)
	}
	_ = conn.Close()
	if cmd := <-done; !slices.Equal(cmd, []string{"etcd"}) {
		t.Fatalf("Main = %v, want etcd", cmd)
	}
	if took := time.Since(start); took < stagger {
		t.Fatalf("the command came after %s, before its turn (%s)", took, stagger)
	}
}

func TestAStopDuringTheStaggerStartsNothing(t *testing.T) {
	up := listen(t, "127.0.0.1:0").Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if cmd, err := Main(ctx, []string{"--stagger=5s", up, "--", "etcd"}, io.Discard); err != nil || cmd != nil {
		t.Fatalf("Main = %v, %v; want nothing to run", cmd, err)
	}
}
