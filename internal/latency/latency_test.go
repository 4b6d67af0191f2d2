package latency

import (
	"math"
	"testing"
)

var bounds = []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512}

// The window holds only what happened between the readings: a member that was fast for hours and
// slow since the last reading shows its slowness, not its history.
func TestSinceIsolatesTheWindow(t *testing.T) {
	before := Histogram{Bounds: bounds, Counts: []uint64{9000, 9900, 10000, 10000, 10000, 10000, 10000, 10000, 10000, 10000}, Count: 10000}
	// 100 more fsyncs, 10 of them between 128 and 256 ms.
	after := Histogram{Bounds: bounds, Counts: []uint64{9050, 9990, 10090, 10090, 10090, 10090, 10090, 10090, 10100, 10100}, Count: 10100}
	w, err := after.Since(before)
	if err != nil {
		t.Fatal(err)
	}
	if w.Count != 100 {
		t.Fatalf("window count %d, want 100", w.Count)
	}
	if p99 := w.Quantile(0.99); p99 < 0.128 || p99 > 0.256 {
		t.Fatalf("window p99 %gs, want within the 128–256 ms bucket", p99)
	}
	if p99 := after.Quantile(0.99); p99 > 0.004 {
		t.Fatalf("lifetime p99 %gs: the history should hide the slow window", p99)
	}
}

func TestSinceRefusesARestartedMember(t *testing.T) {
	before := Histogram{Bounds: bounds[:2], Counts: []uint64{5, 10}, Count: 10}
	if _, err := (Histogram{Bounds: bounds[:2], Counts: []uint64{1, 2}, Count: 2}).Since(before); err == nil {
		t.Fatal("counts that went down gave a window")
	}
	if _, err := (Histogram{Bounds: bounds[:3], Counts: []uint64{5, 10, 10}, Count: 10}).Since(before); err == nil {
		t.Fatal("another bucket layout gave a window")
	}
}

func TestQuantileInterpolatesLikePrometheus(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Histogram
		q    float64
		want float64
	}{
		// histogram_quantile(0.5) over buckets 1ms:0 2ms:100 → halfway through the 1–2 ms bucket.
		{"middle of a bucket", Histogram{Bounds: bounds[:2], Counts: []uint64{0, 100}, Count: 100}, 0.5, 0.0015},
		{"first bucket from zero", Histogram{Bounds: bounds[:2], Counts: []uint64{100, 100}, Count: 100}, 0.99, 0.00099},
		{"beyond the last bound", Histogram{Bounds: bounds[:2], Counts: []uint64{0, 0}, Count: 7}, 0.99, 0.002},
	} {
		if got := tc.h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: q%g = %g, want %g", tc.name, tc.q, got, tc.want)
		}
	}
	if !math.IsNaN((Histogram{Bounds: bounds}).Quantile(0.99)) {
		t.Error("an empty window has a quantile")
	}
}
