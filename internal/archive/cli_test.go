package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// TestWorkerArchiveRunThenVerify: `worker archive run` archives until stopped (a clean exit: the
// next run resumes), `worker archive verify` reports the chain, and a compaction past the chain
// exits with ExitCompacted.
func TestWorkerArchiveRunThenVerify(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	dir := filepath.Join(t.TempDir(), "chain")
	start := head(t, cl)
	runArgs := []string{"run", "--endpoints=" + ms[0].ClientURL, "--dir=" + dir, "--location=pvc://b/chain", "--flush-interval=50ms", fmt.Sprintf("--start-revision=%d", start+1)}
	rctx, stop := context.WithCancel(ctx)
	code := make(chan int, 1)
	go func() { code <- Main(rctx, runArgs, &bytes.Buffer{}) }()
	var last int64
	for i := range 5 {
		resp, err := cl.Put(ctx, fmt.Sprintf("k%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	dest := &DirDestination{Dir: dir}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if name, _ := Latest(ctx, dest); name != "" {
			if _, l, _ := ParseName(name); l == last {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("revisions not archived after a minute")
		}
	}
	stop()
	if c := <-code; c != backup.ExitOK {
		t.Fatalf("archive run stopped with exit %d", c)
	}
	var out bytes.Buffer
	if c := Main(ctx, []string{"verify", "--dir=" + dir, fmt.Sprintf("--after=%d", start)}, &out); c != backup.ExitOK {
		t.Fatalf("verify: exit %d", c)
	}
	var rep ChainReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.First != start+1 || rep.Last != last {
		t.Fatalf("verify reported %q (%v); want revisions %d to %d", out.String(), err, start+1, last)
	}
	if c := Main(ctx, []string{"verify", "--dir=" + dir, fmt.Sprintf("--after=%d", start-1)}, &out); c != ExitBrokenChain {
		t.Fatalf("verify from before the chain: exit %d, want %d", c, ExitBrokenChain)
	}
	for range 2 { // revision last+1 compacted away (a compaction keeps its own revision)
		if _, err := cl.Put(ctx, "more", "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Compact(ctx, head(t, cl)); err != nil {
		t.Fatal(err)
	}
	if c := Main(ctx, runArgs, &out); c != ExitCompacted {
		t.Fatalf("archive run after a compaction past it: exit %d, want %d", c, ExitCompacted)
	}
}
