package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config shapes the workload.
type Config struct {
	// Prefix of every key; Keys keys under it (a small space, so operations contend).
	Prefix string
	Keys   int
	// Seed makes each client's choice of operations, keys and pauses reproducible.
	Seed uint64
	// OpTimeout bounds one call; a write still running then is indeterminate.
	OpTimeout time.Duration
	// Pause between two operations of one client (bounds the load on a 2-core machine).
	Pause time.Duration
}

// Workload is concurrent clients doing puts, linearizable gets and compare-and-swap transactions,
// each operation recorded.
type Workload struct {
	cfg      Config
	start    time.Time
	startRev int64
	stop     chan struct{}
	wg       sync.WaitGroup

	mu  sync.Mutex
	ops []Op
}

// Start runs one client per element of clients (each its own connection, so a client stuck on a
// dead member does not hold up the others) until Stop. The revision before the first operation is
// where the event log that settles indeterminate writes begins.
func Start(ctx context.Context, cfg Config, clients []*clientv3.Client) (*Workload, error) {
	if cfg.Keys <= 0 || cfg.OpTimeout <= 0 {
		return nil, fmt.Errorf("workload config %+v: Keys and OpTimeout must be positive", cfg)
	}
	resp, err := clients[0].Get(ctx, cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("read the start revision under %s: %w", cfg.Prefix, err)
	}
	if resp.Count != 0 {
		return nil, fmt.Errorf("%d keys already exist under %s: the checker's model starts from empty keys", resp.Count, cfg.Prefix)
	}
	w := &Workload{cfg: cfg, start: time.Now(), startRev: resp.Header.Revision, stop: make(chan struct{})}
	for i, cl := range clients {
		w.wg.Add(1)
		go w.client(i, cl)
	}
	return w, nil
}

// Now is the time since the workload started, on the clock its operations are recorded with.
func (w *Workload) Now() time.Duration { return time.Since(w.start) }

func (w *Workload) key(i int) string { return fmt.Sprintf("%s%03d", w.cfg.Prefix, i) }

func (w *Workload) client(id int, cl *clientv3.Client) {
	defer w.wg.Done()
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(id)))
	// What this client last saw in each key: its compare-and-swaps expect it, so many succeed.
	seen := map[string]string{}
	for seq := 0; ; seq++ {
		select {
		case <-w.stop:
			return
		case <-time.After(w.cfg.Pause + time.Duration(rng.Int64N(int64(w.cfg.Pause)+1))):
		}
		in := Input{Key: w.key(rng.IntN(w.cfg.Keys)), Value: fmt.Sprintf("c%d-%d", id, seq)}
		switch r := rng.IntN(10); {
		case r < 4:
			in.Kind, in.Value = Get, ""
		case r < 7:
			in.Kind = Put
		default:
			in.Kind, in.Expect = CAS, seen[in.Key]
		}
		op := w.do(cl, id, in)
		if op.Output.Unknown {
			if in.Kind == Get {
				continue // a failed read changed nothing
			}
			delete(seen, in.Key)
		} else {
			switch {
			case in.Kind == Get:
				seen[in.Key] = op.Output.Value
			case in.Kind == Put || op.Output.Succeeded:
				seen[in.Key] = in.Value
			}
		}
		w.mu.Lock()
		w.ops = append(w.ops, op)
		w.mu.Unlock()
		if op.Output.Unknown {
			time.Sleep(100 * time.Millisecond) // the cluster is in trouble: don't spin
		}
	}
}

// do runs one operation and records what the client learned.
func (w *Workload) do(cl *clientv3.Client, id int, in Input) Op {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.OpTimeout)
	defer cancel()
	op := Op{Client: id, Input: in, Call: w.Now()}
	var err error
	switch in.Kind {
	case Get:
		var resp *clientv3.GetResponse
		if resp, err = cl.Get(ctx, in.Key); err == nil {
			if len(resp.Kvs) > 0 {
				op.Output.Value = string(resp.Kvs[0].Value)
			}
			op.Output.Revision, op.Output.Term = resp.Header.Revision, resp.Header.RaftTerm
		}
	case Put:
		var resp *clientv3.PutResponse
		if resp, err = cl.Put(ctx, in.Key, in.Value); err == nil {
			op.Output.Succeeded = true
			op.Output.Revision, op.Output.Term = resp.Header.Revision, resp.Header.RaftTerm
		}
	case CAS:
		cmp := clientv3.Compare(clientv3.Value(in.Key), "=", in.Expect)
		if in.Expect == "" {
			cmp = clientv3.Compare(clientv3.CreateRevision(in.Key), "=", 0)
		}
		var resp *clientv3.TxnResponse
		if resp, err = cl.Txn(ctx).If(cmp).Then(clientv3.OpPut(in.Key, in.Value)).Commit(); err == nil {
			op.Output.Succeeded = resp.Succeeded
			op.Output.Revision, op.Output.Term = resp.Header.Revision, resp.Header.RaftTerm
		}
	}
	op.Return = w.Now()
	if err != nil {
		op.Output, op.Return = Output{Unknown: true}, never
	}
	return op
}

// Stop ends the clients (each finishes the call it is in, bounded by OpTimeout) and returns the
// history so far.
func (w *Workload) Stop() []Op {
	close(w.stop)
	w.wg.Wait()
	return w.History()
}

// History is a copy of the operations recorded so far.
func (w *Workload) History() []Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Op(nil), w.ops...)
}

// FinalRead reads every key linearizably after the workload stopped, retrying each for up to
// timeout, and records the reads as operations of one more client: the last word on what survived.
func (w *Workload) FinalRead(cl *clientv3.Client, client int, timeout time.Duration) ([]Op, error) {
	var reads []Op
	deadline := time.Now().Add(timeout)
	for i := 0; i < w.cfg.Keys; i++ {
		for {
			op := w.do(cl, client, Input{Kind: Get, Key: w.key(i)})
			if !op.Output.Unknown {
				reads = append(reads, op)
				break
			}
			if time.Now().After(deadline) {
				return reads, fmt.Errorf("final read of %s: no answer within %s", w.key(i), timeout)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return reads, nil
}

// Events reads etcd's event log of the prefix from the workload's start with a watch: every write
// that took effect, in revision order. A last put of an end marker (outside the workload's keys)
// says where the log ends.
func (w *Workload) Events(ctx context.Context, cl *clientv3.Client) ([]Event, error) {
	marker := w.cfg.Prefix + "~end"
	if _, err := cl.Put(ctx, marker, ""); err != nil {
		return nil, fmt.Errorf("write the end marker %s: %w", marker, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var events []Event
	for resp := range cl.Watch(clientv3.WithRequireLeader(wctx), w.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(w.startRev+1)) {
		if err := resp.Err(); err != nil {
			return nil, fmt.Errorf("watch %s from revision %d: %w", w.cfg.Prefix, w.startRev+1, err)
		}
		for _, ev := range resp.Events {
			if string(ev.Kv.Key) == marker {
				return events, nil
			}
			events = append(events, Event{Key: string(ev.Kv.Key), Value: string(ev.Kv.Value), Revision: ev.Kv.ModRevision})
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("watch %s: %w", w.cfg.Prefix, err)
	}
	return nil, errors.New("watch closed before the end marker")
}
