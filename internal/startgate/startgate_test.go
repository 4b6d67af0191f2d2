package startgate

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
)

var client = &http.Client{Timeout: time.Second}

// withMetrics gives a member a plain-HTTP metrics listener, as member pods have, and returns its base URL.
func withMetrics(t *testing.T, m *etcdtest.Member) string {
	base := "http://" + loopback.FreeAddr(t)
	u, _ := url.Parse(base)
	m.Configure(func(cfg *embed.Config) { cfg.ListenMetricsUrls = []url.URL{*u} })
	return base
}

func TestWaitHoldsUntilEtcdServes(t *testing.T) {
	m := etcdtest.NewMemberURLs(t, "m0")
	base := withMetrics(t, m)
	done := make(chan Outcome, 1)
	var ended time.Time
	go func() {
		o := Wait(t.Context(), client, base, Limits{Serve: 30 * time.Second, Up: time.Minute}, interval)
		ended = time.Now()
		done <- o
	}()
	time.Sleep(300 * time.Millisecond) // the hook starts with the container, before etcd listens
	select {
	case o := <-done:
		t.Fatalf("the wait ended (%s) before etcd was started", o)
	default:
	}
	etcdtest.StartMembers(t, []*etcdtest.Member{m}, nil)
	served := time.Now()
	if o := <-done; o != Serving {
		t.Fatalf("outcome %s, want %s", o, Serving)
	}
	if late := ended.Sub(served); late > time.Second {
		t.Errorf("the wait ended %s after etcd served", late)
	}
}

func TestWaitEndsAtOnceForALearner(t *testing.T) {
	ms := etcdtest.StartCluster(t, 1)
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{ms[0].ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	learner := etcdtest.NewMemberURLs(t, "learner")
	base := withMetrics(t, learner)
	if _, err := cl.MemberAddAsLearner(t.Context(), []string{learner.PeerURL}); err != nil {
		t.Fatal(err)
	}
	etcdtest.Join(t, learner, []string{ms[0].Name + "=" + ms[0].PeerURL, learner.Name + "=" + learner.PeerURL})
	start := time.Now()
	if o := Wait(t.Context(), client, base, Limits{Serve: 20 * time.Second, Up: time.Minute}, interval); o != Learner {
		t.Fatalf("outcome %s, want %s", o, Learner)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a learner was held %s", took)
	}
}

// Without quorum etcd is up and cannot serve: the probes take over at the serve limit.
func TestWaitEndsAtTheServeLimitWithoutQuorum(t *testing.T) {
	ms := []*etcdtest.Member{etcdtest.NewMemberURLs(t, "m0"), etcdtest.NewMemberURLs(t, "m1")}
	base := withMetrics(t, ms[0])
	etcdtest.StartMembers(t, ms, nil)
	ms[1].Stop()
	start := time.Now()
	if o := Wait(t.Context(), client, base, Limits{Serve: 2 * time.Second, Up: time.Minute}, interval); o != NotServing {
		t.Fatalf("outcome %s, want %s", o, NotServing)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("held %s with a serve limit of 2s", took)
	}
}

// A server that is not up is held past the serve limit, until the up limit: liveness, which would
// restart it, is probed only once the hook returns.
func TestWaitHoldsAServerThatIsNotUpUntilTheUpLimit(t *testing.T) {
	start := time.Now()
	o := Wait(t.Context(), client, "http://"+loopback.FreeAddr(t), Limits{Serve: 100 * time.Millisecond, Up: 1500 * time.Millisecond}, interval)
	if took := time.Since(start); o != Down || took < 1400*time.Millisecond {
		t.Fatalf("outcome %s after %s, want %s after the up limit", o, took, Down)
	}
}

func TestWaitEndsWhenStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	// Nothing listens there: the hook of a container stopped before etcd ever listened.
	if o := Wait(ctx, client, "http://"+loopback.FreeAddr(t), Limits{Serve: time.Minute, Up: time.Minute}, interval); o != Stopped {
		t.Fatalf("outcome %s, want %s", o, Stopped)
	}
}
