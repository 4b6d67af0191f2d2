package etcdclient

import (
	"context"
	"sync"
	"time"
)

// CallTrace keeps the slowest call to etcd (RPC or metrics scrape) made under one context, so a
// reconcile pass can say where its time went without timing code at each call site.
type CallTrace struct {
	mu      sync.Mutex
	calls   int
	slowest string
	took    time.Duration
}

type callTraceKey struct{}

// WithCallTrace returns a context whose etcd calls are recorded in the returned trace.
func WithCallTrace(ctx context.Context) (context.Context, *CallTrace) {
	t := &CallTrace{}
	return context.WithValue(ctx, callTraceKey{}, t), t
}

// Summary is the number of calls, the slowest one and how long it took.
func (t *CallTrace) Summary() (calls int, slowest string, took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls, t.slowest, t.took
}

// traceCall records one call of the context's trace, if it has one.
func traceCall(ctx context.Context, call string, took time.Duration) {
	t, _ := ctx.Value(callTraceKey{}).(*CallTrace)
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls++
	if took > t.took {
		t.slowest, t.took = call, took
	}
}
