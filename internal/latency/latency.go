// Package latency reads what etcd's own latency histograms say about one window of time: the
// difference of two readings of a cumulative Prometheus histogram, and a quantile of it.
package latency

import (
	"fmt"
	"math"
	"slices"
)

// Histogram is a cumulative Prometheus histogram as read at one moment: Counts[i] observations were at
// most Bounds[i] seconds, Count is every observation (the +Inf bucket).
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
}

// Since is the histogram of the observations made after prev was read. It fails when the two do not
// describe the same series (other buckets, or counts that went down: the process restarted).
func (h Histogram) Since(prev Histogram) (Histogram, error) {
	if !slices.Equal(h.Bounds, prev.Bounds) || len(h.Counts) != len(prev.Counts) {
		return Histogram{}, fmt.Errorf("bucket layout changed")
	}
	if h.Count < prev.Count {
		return Histogram{}, fmt.Errorf("count went down from %d to %d: the member restarted", prev.Count, h.Count)
	}
	out := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts)), Count: h.Count - prev.Count}
	for i := range h.Counts {
		if h.Counts[i] < prev.Counts[i] {
			return Histogram{}, fmt.Errorf("bucket %g went down from %d to %d: the member restarted", h.Bounds[i], prev.Counts[i], h.Counts[i])
		}
		out.Counts[i] = h.Counts[i] - prev.Counts[i]
	}
	return out, nil
}

// Quantile estimates the q-quantile (0 < q < 1) in seconds the way Prometheus' histogram_quantile does
// (linear within the bucket holding it), so the figures match what the dashboards and alerts show.
// Observations above the last finite bound are reported at that bound. NaN when h is empty.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * float64(h.Count)
	lower, below := 0.0, uint64(0)
	for i, bound := range h.Bounds {
		if float64(h.Counts[i]) >= rank {
			inBucket := h.Counts[i] - below
			if inBucket == 0 {
				return bound
			}
			return lower + (bound-lower)*(rank-float64(below))/float64(inBucket)
		}
		lower, below = bound, h.Counts[i]
	}
	return h.Bounds[len(h.Bounds)-1]
}
