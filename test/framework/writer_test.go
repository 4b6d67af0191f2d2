package framework

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

func TestProgressRequiresAcksThroughoutTheWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(secs ...float64) []time.Time {
		var out []time.Time
		for _, s := range secs {
			out = append(out, t0.Add(time.Duration(s*float64(time.Second))))
		}
		return out
	}
	end := t0.Add(10 * time.Second)
	for _, tc := range []struct {
		name    string
		acks    []time.Time
		to      time.Time
		minAcks int
		want    string // "" for no error, else a part of it
	}{
		{"steady", at(1, 2, 3, 4, 5, 6, 7, 8, 9), end, 5, ""},
		{"no write at all", nil, end, 1, "no write acknowledged for the last 10s"},
		{"writes only before the fault", at(-3, -2, -1), end, 1, "no write acknowledged for the last 10s"},
		{"a stall in the middle", at(1, 2, 8, 9), end, 1, "no write acknowledged for 6s"},
		{"a late start", at(4, 5, 6, 7, 8, 9), end, 1, "no write acknowledged for 4s"},
		{"stopped before the end", at(1, 2, 3, 4), end, 1, "the last 6s"},
		{"too few", at(2, 5, 8), end, 5, "3 writes acknowledged in the fault window"},
		{"writes after the window do not count", at(1, 2, 3, 12, 13), end, 1, "the last 7s"},
		{"never finished", at(1, 2), time.Time{}, 1, "no end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := progress(tc.acks, t0, tc.to, 3*time.Second, tc.minAcks)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("progress: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("progress: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A writer against real etcd that stops answering when the fault begins: every key it saw
// acknowledged (all before the fault) is still there, which is all CheckKeys ever asked, yet the
// writer checked nothing about the fault; Progress says so.
func TestWriterWithoutProgressDuringTheFaultFails(t *testing.T) {
	ms := etcdtest.StartCluster(t, 1)
	cl, err := clientv3.New(clientv3.Config{Endpoints: etcdtest.ClientURLs(ms), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	w := StartWriter(cl, "/w/")
	for deadline := time.Now().Add(time.Minute); ; {
		w.mu.Lock()
		n := len(w.acked)
		w.mu.Unlock()
		if n >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes acknowledged by a healthy member", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.FaultBegins()
	ms[0].Stop()
	time.Sleep(1500 * time.Millisecond) // a window that holds more than maxGap without etcd
	w.FaultEnds()
	acked, _ := w.Finish()
	if len(acked) < 5 {
		t.Fatalf("%d acknowledged keys", len(acked))
	}
	err = w.Progress(time.Second, 1)
	if err == nil || !strings.Contains(err.Error(), "no write acknowledged") {
		t.Fatalf("Progress of a writer that wrote nothing during the fault: %v, want an error", err)
	}
	// The same writer on a healthy window passes: its acknowledgements before the fault.
	w.from, w.to = w.acks[0], w.acks[len(w.acks)-1]
	if err := w.Progress(time.Minute, 5); err != nil {
		t.Fatalf("Progress before the fault: %v", err)
	}
}
