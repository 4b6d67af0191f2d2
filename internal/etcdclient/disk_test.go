package etcdclient

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// A member's disk histograms, read twice around a burst of writes, give the window of those writes:
// one WAL fsync per sequential put at least, and the backend commits that made them durable.
func TestDiskLatencyWindowCountsTheWrites(t *testing.T) {
	ctx := context.Background()
	c, ms := startOne(t)
	metricsURL := ms[0].ClientURL + "/metrics" // embed serves /metrics on the client URL too
	before, err := ReadDiskLatency(ctx, metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	const puts = 50
	for i := range puts {
		if _, err := c.c.Put(ctx, fmt.Sprintf("/disk/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the backend commits its batch every 100 ms
	after, err := ReadDiskLatency(ctx, metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	wal, err := after.WALFsync.Since(before.WALFsync)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := after.BackendCommit.Since(before.BackendCommit)
	if err != nil {
		t.Fatal(err)
	}
	if wal.Count < puts {
		t.Fatalf("%d WAL fsyncs in the window of %d sequential puts", wal.Count, puts)
	}
	if commit.Count == 0 {
		t.Fatal("no backend commit in the window")
	}
	if p99 := wal.Quantile(0.99); math.IsNaN(p99) || p99 <= 0 || p99 > 10 {
		t.Fatalf("WAL fsync p99 %gs", p99)
	}

	if _, err := ReadDiskLatency(ctx, "http://127.0.0.1:1/metrics"); err == nil {
		t.Fatal("reading a closed port succeeded")
	}
}
