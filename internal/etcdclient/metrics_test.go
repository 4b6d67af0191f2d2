package etcdclient

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Every unary call is timed by RPC without code in the methods: a member list on a real etcd is one
// more observation of Cluster/MemberList with code OK.
func TestEtcdCallsAreTimedByRPC(t *testing.T) {
	c, _ := startOne(t)
	before := rpcCount(t, "Cluster/MemberList", "OK")
	if _, _, err := c.MemberList(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rpcCount(t, "Cluster/MemberList", "OK"); got != before+1 {
		t.Fatalf("Cluster/MemberList observed %d times, want %d", got, before+1)
	}
}

func rpcCount(t *testing.T, rpc, code string) uint64 {
	t.Helper()
	m := &dto.Metric{}
	if err := RPCDuration.WithLabelValues(rpc, code).(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// A traced context keeps the slowest call made under it: the pass log names it.
func TestCallTraceKeepsTheSlowestCall(t *testing.T) {
	c, _ := startOne(t)
	ctx, trace := WithCallTrace(context.Background())
	if _, _, err := c.MemberList(ctx); err != nil {
		t.Fatal(err)
	}
	calls, slowest, took := trace.Summary()
	if calls != 1 || !strings.HasPrefix(slowest, "Cluster/MemberList at ") || took <= 0 {
		t.Fatalf("trace = %d calls, slowest %q in %s; want 1 call, Cluster/MemberList", calls, slowest, took)
	}
	if _, _, err := c.MemberList(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls, _, _ := trace.Summary(); calls != 1 {
		t.Fatalf("an untraced call was recorded: %d calls", calls)
	}
}
