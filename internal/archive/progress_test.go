package archive

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// progressOf serves w's status endpoint on loopback and returns a reader of it.
func progressOf(t *testing.T, w *Writer) (read func() Progress, url string) {
	t.Helper()
	srv := httptest.NewServer(w.StatusHandler())
	t.Cleanup(srv.Close)
	return func() Progress {
		t.Helper()
		p, err := ReadProgress(context.Background(), srv.URL+"/status")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, srv.URL
}

func waitProgress(t *testing.T, read func() Progress, what string, ok func(Progress) error) Progress {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := read()
		err := ok(p)
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v (progress %+v)", what, err, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWriterReportsItsProgress: the status endpoint tells the chain's ends and how far behind the
// source the durable archive is: current while the source is idle (the watch's progress
// notifications), behind while a revision waits in memory, the chain's ends after a restart before
// any new write, and frozen from the moment the source is gone.
func TestWriterReportsItsProgress(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 1)
	cl := dial(t, ms[0].ClientURL)
	dest := &DirDestination{Dir: filepath.Join(t.TempDir(), "chain")}
	from := head(t, cl) + 1
	w1 := &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, FlushInterval: 200 * time.Millisecond, StartRevision: from}
	read, url := progressOf(t, w1)
	run := startWriter(t, w1)

	waitProgress(t, read, "an empty chain, caught up", func(p Progress) error {
		if p.State != StateArchiving || p.DurableThrough == nil || p.LagSeconds == nil || p.LastRevision != 0 || p.FirstRevision != 0 || p.ClusterID == "" {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	for i := range 5 {
		if _, err := cl.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	last := head(t, cl)
	waitProgress(t, read, "the writes archived", func(p Progress) error {
		if p.LastRevision != last || p.FirstRevision != from || p.LastTime == nil || p.PendingSince != nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	idle := time.Now()
	waitProgress(t, read, "durable through an instant after the last write, with no write since", func(p Progress) error {
		if !p.DurableThrough.After(idle) {
			return fmt.Errorf("durable through %s", p.DurableThrough)
		}
		return nil
	})
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{fmt.Sprintf("etcd_autopilot_archive_worker_last_revision %d\n", last), "etcd_autopilot_archive_worker_lag_seconds ", "etcd_autopilot_archive_worker_archiving 1\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
	run.kill(t)

	// The next writer knows the chain's ends before anything new is written; a write waits in its
	// memory for the flush interval, and the durable archive is behind it meanwhile.
	w2 := &Writer{Client: dial(t, ms[0].ClientURL), Dest: dest, FlushInterval: 3 * time.Second}
	read, _ = progressOf(t, w2)
	startWriter(t, w2)
	waitProgress(t, read, "the chain's ends after a restart", func(p Progress) error {
		if p.State != StateArchiving || p.FirstRevision != from || p.LastRevision != last || p.DurableThrough == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	putAt := time.Now()
	if _, err := cl.Put(ctx, "pending", "v"); err != nil {
		t.Fatal(err)
	}
	waitProgress(t, read, "a revision in memory", func(p Progress) error {
		if p.PendingSince == nil {
			return fmt.Errorf("nothing pending")
		}
		if !p.DurableThrough.Before(putAt) || *p.LagSeconds < p.Now.Sub(putAt).Seconds() {
			t.Fatalf("a revision in memory counts as durable: %+v", p)
		}
		return nil
	})
	waitProgress(t, read, "the pending revision stored and the archive current again", func(p Progress) error {
		if p.LastRevision != last+1 || p.PendingSince != nil || !p.DurableThrough.After(putAt) {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	// The source is gone: nothing later is durable, whatever the writer's clock says (the client
	// keeps redialling, so the watch may not even fail).
	ms[0].Stop()
	stopAt := time.Now()
	p := waitProgress(t, read, "a while after the source stopped", func(p Progress) error {
		if p.Now.Sub(stopAt) < 2*time.Second {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if p.DurableThrough.After(stopAt) || *p.LagSeconds < p.Now.Sub(stopAt).Seconds() {
		t.Fatalf("durable after the source stopped: %+v (stopped at %s)", p, stopAt)
	}
}
