package archive

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// States of a writer, in Progress.State.
const (
	// StateStarting: reading the destination's last segment and the source's revision.
	StateStarting = "starting"
	// StateArchiving: watching the source and storing segments.
	StateArchiving = "archiving"
	// StateRetrying: the watch or an upload failed; the writer retries, keeping what it buffered.
	StateRetrying = "retrying"
	// StateStopped: Run returned (stopped, or the chain cannot continue: Error says why).
	StateStopped = "stopped"
)

// Progress is how far a writer got, as its status endpoint serves it (JSON). Times are the
// writer's clock.
type Progress struct {
	State string `json:"state"`
	// ClusterID (hex) of the source, once read.
	ClusterID string `json:"clusterID,omitempty"`
	// FirstRevision is the first revision of the chain's oldest segment when the writer started
	// (segments deleted since, by retention, are not noticed); 0 while the chain is empty.
	FirstRevision int64 `json:"firstRevision,omitempty"`
	// LastRevision is the last revision of the newest durable segment, LastTime its observed time;
	// zero while the chain is empty.
	LastRevision int64      `json:"lastRevision,omitempty"`
	LastTime     *time.Time `json:"lastTime,omitempty"`
	// RestartRevision is where the chain restarted after a full snapshot (StartRevision beyond
	// the last segment): revisions before it may be missing. 0 when it did not.
	RestartRevision int64 `json:"restartRevision,omitempty"`
	// PendingSince is the observed time of the oldest revision held in memory, not yet durable.
	PendingSince *time.Time `json:"pendingSince,omitempty"`
	// DurableThrough: every revision the source committed before it is durable in the chain.
	// The writer learns it from the source's watch progress notifications, so an idle source
	// keeps it current and a stalled watch lets it fall behind.
	DurableThrough *time.Time `json:"durableThrough,omitempty"`
	// LagSeconds is Now minus DurableThrough: at most what a restore to the latest point would
	// miss if the source were lost now. Absent until DurableThrough is known.
	LagSeconds *float64 `json:"lagSeconds,omitempty"`
	// Error is the last error: the one being retried, or the one Run stopped with.
	Error string    `json:"error,omitempty"`
	Now   time.Time `json:"now"`
}

// progress is what a writer records of itself for Progress, safe for concurrent use: the
// status endpoint reads it while Run writes it.
type progress struct {
	mu sync.Mutex
	p  Progress
	// observed: every revision committed before it has been delivered to the writer.
	// requested: when the oldest unanswered progress request was sent (zero: none).
	observed, requested time.Time
}

func (pr *progress) update(f func(p *Progress)) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	f(&pr.p)
}

// setObserved records that everything committed before at was delivered; durable says whether
// nothing is held in memory, so it is all durable too.
func (pr *progress) setObserved(at time.Time, durable bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if at.After(pr.observed) {
		pr.observed = at
	}
	if durable {
		pr.durable(pr.observed)
	}
}

// durable moves DurableThrough forward to at; the caller holds mu.
func (pr *progress) durable(at time.Time) {
	if at.IsZero() || (pr.p.DurableThrough != nil && !at.After(*pr.p.DurableThrough)) {
		return
	}
	pr.p.DurableThrough = &at
}

// flushed records a stored segment: everything observed so far is durable.
func (pr *progress) flushed(h Header) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	last := h.LastTime
	pr.p.LastRevision, pr.p.LastTime, pr.p.PendingSince = h.Last, &last, nil
	if pr.p.FirstRevision == 0 {
		pr.p.FirstRevision = h.First
	}
	pr.durable(pr.observed)
}

// request notes a progress request sent at now, unless an older one is unanswered.
func (pr *progress) request(now time.Time) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.requested.IsZero() {
		pr.requested = now
	}
}

// answered takes the time of the oldest unanswered progress request: the revision a
// notification carries was read no earlier. Zero when none was sent.
func (pr *progress) answered() time.Time {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	at := pr.requested
	pr.requested = time.Time{}
	return at
}

// Progress is the writer's progress now.
func (w *Writer) Progress() Progress {
	w.prog.mu.Lock()
	p := w.prog.p
	w.prog.mu.Unlock()
	if p.State == "" {
		p.State = StateStarting
	}
	p.Now = w.now().UTC()
	if p.DurableThrough != nil {
		lag := max(p.Now.Sub(*p.DurableThrough).Seconds(), 0)
		p.LagSeconds = &lag
	}
	return p
}

// StatusHandler serves the writer's Progress: GET /status as JSON, GET /metrics as Prometheus
// text (the same numbers, for a scraper pointed at the pod).
func (w *Writer) StatusHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(w.Progress())
	})
	mux.HandleFunc("GET /metrics", func(rw http.ResponseWriter, _ *http.Request) {
		p := w.Progress()
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4")
		gauge := func(name, help string, v float64) {
			_, _ = fmt.Fprintf(rw, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
		}
		if p.LagSeconds != nil {
			gauge("etcd_autopilot_archive_worker_lag_seconds", "Time since which revisions committed by the source may not be durable in the archive.", *p.LagSeconds)
		}
		gauge("etcd_autopilot_archive_worker_first_revision", "First revision of the chain's oldest segment when the writer started.", float64(p.FirstRevision))
		gauge("etcd_autopilot_archive_worker_last_revision", "Last revision of the newest durable segment.", float64(p.LastRevision))
		if p.LastTime != nil {
			gauge("etcd_autopilot_archive_worker_last_revision_timestamp_seconds", "Observed time of the newest durable revision.", float64(p.LastTime.UnixNano())/1e9)
		}
		archiving := 0.0
		if p.State == StateArchiving {
			archiving = 1
		}
		gauge("etcd_autopilot_archive_worker_archiving", "1 while the writer watches the source, 0 while it starts, retries or has stopped.", archiving)
	})
	return mux
}

// ReadProgress asks a writer's status endpoint (http://host:port/status) for its Progress.
func ReadProgress(ctx context.Context, url string) (Progress, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Progress{}, fmt.Errorf("archive status %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Progress{}, fmt.Errorf("archive status: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return Progress{}, fmt.Errorf("archive status %s: HTTP %s", url, resp.Status)
	}
	var p Progress
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&p); err != nil {
		return Progress{}, fmt.Errorf("archive status %s: %w", url, err)
	}
	return p, nil
}
