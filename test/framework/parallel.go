package framework

import (
	"cmp"
	"flag"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Parallel runs t beside the other tests, in one of the suite's slots (E2E_PARALLEL, else go test's
// -parallel), handed out longest test first. alone is about how long t takes on the CI machine beside
// the others; it only orders the tests. Go's own scheduler starts the paused tests in no set order (in
// practice close to the reverse of their declaration), and a long test that starts last ends the suite
// minutes after everything else: started first, the short ones fill the slots around it.
//
// A test whose subtests run in parallel calls t.Parallel itself and takes no slot: its subtests do.
func Parallel(t *testing.T, alone time.Duration) {
	t.Parallel()
	asked := time.Now()
	release := suiteSlots().acquire(alone)
	got := time.Now()
	// First registered, so run last: the slot covers the namespace's teardown. The test's own time is
	// logged apart from its wait, which go test's duration includes: it is the figure alone is set from.
	t.Cleanup(func() {
		release()
		t.Logf("ran %s in its slot, after waiting %s for one (ordered as %s)",
			time.Since(got).Round(time.Second), got.Sub(asked).Round(time.Second), alone)
	})
}

// gatherWindow is how long the first slots wait for the other tests to arrive, so that the longest
// of them gets one: every top-level test resumes from t.Parallel within milliseconds of the others.
const gatherWindow = 2 * time.Second

// suiteSlots is the suite's gate, made at its first use: go test parses -parallel after package
// initialisation, so a gate made then would not see it.
var suiteSlots = sync.OnceValue(func() *slotGate { return newSlotGate(slotCount()) })

// slotCount is E2E_PARALLEL, else the value of go test's -parallel.
func slotCount() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_PARALLEL")); err == nil && n > 0 {
		return n
	}
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// slotGate hands out size slots to waiting tests, the longest expected first, then the earliest
// to ask; none before gatherWindow has passed since the first asked.
type slotGate struct {
	mu      sync.Mutex
	size    int
	busy    int
	waiting []*ticket
	asked   int
	open    bool
	window  time.Duration
}

type ticket struct {
	alone time.Duration
	seq   int
	ready chan struct{}
}

func newSlotGate(size int) *slotGate { return &slotGate{size: size, window: gatherWindow} }

// acquire waits for a slot and returns its release.
func (g *slotGate) acquire(alone time.Duration) func() {
	g.mu.Lock()
	tk := &ticket{alone: alone, seq: g.asked, ready: make(chan struct{})}
	g.waiting = append(g.waiting, tk)
	if g.asked == 0 {
		time.AfterFunc(g.window, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.open = true
			g.grant()
		})
	}
	g.asked++
	g.grant()
	g.mu.Unlock()
	<-tk.ready
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.busy--
		g.grant()
	}
}

// grant hands the free slots to the longest waiting tests; g.mu is held.
func (g *slotGate) grant() {
	if !g.open {
		return
	}
	slices.SortStableFunc(g.waiting, func(a, b *ticket) int {
		if c := cmp.Compare(b.alone, a.alone); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for g.busy < g.size && len(g.waiting) > 0 {
		tk := g.waiting[0]
		g.waiting = g.waiting[1:]
		g.busy++
		close(tk.ready)
	}
}
