package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Verdict is a stopped workload's history, completed and checked.
type Verdict struct {
	// History is what the clients recorded, with the final reads (Final of them) at its end.
	History []Op
	Final   int
	// Resolved is the history the checker was given: indeterminate writes settled by etcd's log.
	Resolved []Op
	Resolution
	// Result is porcupine's answer; Visualisation the file it drew the history in; CheckErr why the
	// check itself failed (a timeout), if it did.
	Result        porcupine.CheckResult
	Visualisation string
	CheckErr      error
	CheckTook     time.Duration
}

// Verify completes a stopped workload's history: a final read of every key through cl (clients of
// them, so the last writes are seen), etcd's event log to settle the writes whose outcome was not
// seen, and a linearizability check (porcupine, bounded by timeout; its visualisation under dir).
func Verify(w *Workload, history []Op, cl *clientv3.Client, clients int, timeout time.Duration, dir string) (Verdict, error) {
	final, err := w.FinalRead(cl, clients, time.Minute)
	if err != nil {
		return Verdict{}, fmt.Errorf("final read: %w", err)
	}
	events, err := w.Events(context.Background(), cl)
	if err != nil {
		return Verdict{}, fmt.Errorf("etcd's event log: %w", err)
	}
	v := Verdict{History: append(history, final...), Final: len(final)}
	v.Resolved, v.Resolution = Resolve(v.History, events)
	start := time.Now()
	v.Result, v.Visualisation, v.CheckErr = Check(v.Resolved, timeout, dir)
	v.CheckTook = time.Since(start)
	return v, nil
}
