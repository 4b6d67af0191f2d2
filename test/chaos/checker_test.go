package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// record drives the workload against a real 3-member embedded etcd for d, stopping the leader half way
// so that some writes end indeterminate, and returns the history (final reads included) and etcd's
// event log.
func record(t *testing.T, d time.Duration) ([]Op, []Event) {
	t.Helper()
	ms := etcdtest.StartCluster(t, 3)
	dial := func() *clientv3.Client {
		cl, err := clientv3.New(clientv3.Config{Endpoints: etcdtest.ClientURLs(ms), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	var clients []*clientv3.Client
	for range 6 {
		clients = append(clients, dial())
	}
	ctx := context.Background()
	w, err := Start(ctx, Config{Prefix: "/chaos/", Keys: 4, Seed: 1, OpTimeout: time.Second, Pause: 2 * time.Millisecond}, clients)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d / 2)
	for _, m := range ms {
		if m.Etcd.Server.Leader() == m.Etcd.Server.MemberID() {
			m.Stop()
			break
		}
	}
	time.Sleep(d / 2)
	history := w.Stop()
	final, err := w.FinalRead(clients[0], len(clients), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	events, err := w.Events(ctx, clients[0])
	if err != nil {
		t.Fatal(err)
	}
	return append(history, final...), events
}

// The self-test of the checker: a real history passes; the same history with one read made stale,
// one acknowledged write taken out of etcd's log, or one write nobody made added to it, is caught.
func TestCheckerCatchesCorruptedHistories(t *testing.T) {
	history, events := record(t, 4*time.Second)
	resolved, res := Resolve(history, events)
	unknown := 0
	for _, op := range history {
		if op.Output.Unknown {
			unknown++
		}
	}
	t.Logf("%d operations, %d events, %d indeterminate: %d settled by the log, %d never happened", len(history), len(events), unknown, res.Settled, res.Dropped)
	if len(history) < 500 {
		t.Fatalf("only %d operations: the workload barely ran", len(history))
	}
	if len(res.Lost) != 0 || len(res.Phantom) != 0 {
		t.Fatalf("a clean run: lost %v, phantom %v", res.Lost, res.Phantom)
	}
	dir := t.TempDir()
	if result, path, err := Check(resolved, time.Minute, dir); err != nil || result != porcupine.Ok {
		t.Fatalf("a clean history is %s (%v); visualisation %s", result, err, path)
	}

	t.Run("stale final read", func(t *testing.T) {
		// The final read of a key returns a value that a later acknowledged write overwrote.
		last := map[string]Event{}
		for _, e := range events {
			last[e.Key] = e
		}
		bad := append([]Op(nil), resolved...)
		for i := len(bad) - 1; i >= 0; i-- {
			fin := bad[i]
			if fin.Input.Kind != Get || fin.Client != 6 {
				continue
			}
			for _, e := range events {
				if e.Key == fin.Input.Key && e.Revision < last[e.Key].Revision && acknowledged(resolved, e) {
					bad[i].Output.Value = e.Value
					result, path, err := Check(bad, time.Minute, dir)
					if err != nil || result != porcupine.Illegal {
						t.Fatalf("a stale read passed as %s (%v)", result, err)
					}
					if _, err := os.Stat(path); err != nil || filepath.Dir(path) != dir {
						t.Fatalf("visualisation not kept under %s: %q %v", dir, path, err)
					}
					return
				}
			}
		}
		t.Fatal("no overwritten acknowledged value to read stale")
	})
	t.Run("lost acknowledged write", func(t *testing.T) {
		for i, e := range events {
			if acknowledged(resolved, e) {
				short := append(append([]Event(nil), events[:i]...), events[i+1:]...)
				if _, res := Resolve(history, short); len(res.Lost) != 1 || res.Lost[0].Input.Value != e.Value {
					t.Fatalf("dropping %+v from the log: lost %v", e, res.Lost)
				}
				return
			}
		}
		t.Fatal("no acknowledged write")
	})
	t.Run("phantom write", func(t *testing.T) {
		extra := append(append([]Event(nil), events...), Event{Key: "/chaos/000", Value: "nobody", Revision: 1 << 40})
		if _, res := Resolve(history, extra); len(res.Phantom) != 1 || res.Phantom[0].Value != "nobody" {
			t.Fatalf("a write nobody made: phantom %v", res.Phantom)
		}
	})
}

// acknowledged says whether e was written by an operation whose client saw it succeed.
func acknowledged(history []Op, e Event) bool {
	for _, op := range history {
		if op.Input.Kind != Get && op.Input.Key == e.Key && op.Input.Value == e.Value && op.Return != never {
			return true
		}
	}
	return false
}

// Writes whose outcome the client never learned are settled by etcd's log: in it, they happened (and
// the checker must place them); not in it, they never took effect and leave the history.
func TestResolveSettlesIndeterminateWrites(t *testing.T) {
	history := []Op{
		{Client: 0, Input: Input{Kind: Put, Key: "k", Value: "a"}, Output: Output{Unknown: true}, Call: 1, Return: never},
		{Client: 1, Input: Input{Kind: CAS, Key: "k", Value: "b", Expect: "x"}, Output: Output{Unknown: true}, Call: 2, Return: never},
		{Client: 2, Input: Input{Kind: Get, Key: "k"}, Output: Output{Value: "a"}, Call: 3, Return: 4},
	}
	resolved, res := Resolve(history, []Event{{Key: "k", Value: "a", Revision: 7}})
	if res.Settled != 1 || res.Dropped != 1 || len(resolved) != 2 || !resolved[0].Output.Succeeded || resolved[0].Output.Revision != 7 {
		t.Fatalf("resolution %+v, history %+v", res, resolved)
	}
	if result, _, err := Check(resolved, time.Minute, t.TempDir()); err != nil || result != porcupine.Ok {
		t.Fatalf("a read of a settled write is %s (%v)", result, err)
	}
	if _, _, err := Check(history, time.Minute, t.TempDir()); err == nil {
		t.Fatal("an unresolved history was checked")
	}
}
