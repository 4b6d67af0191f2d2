package etcdclient

import (
	"context"
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcd-autopilot/etcd-autopilot/internal/latency"
)

// peerRTTMetric is etcd's histogram of the smoothed round-trip time to each peer ("To", the peer ID
// in hex), observed every 30 s per peer by rafthttp's prober (every 5 s while the peer is unhealthy).
const peerRTTMetric = "etcd_network_peer_round_trip_time_seconds"

// ReadPeerRTT reads a member's peer round-trip-time histograms from its metrics endpoint
// (http://host:port/metrics), by peer ID in hex. Like the disk histograms they are cumulative since
// the member started: one window is the difference of two readings (latency.Histogram.Since).
// A member that has no peer yet (a one-member cluster) has none.
func ReadPeerRTT(ctx context.Context, metricsURL string) (map[string]latency.Histogram, error) {
	families, err := scrape(ctx, metricsURL, peerRTTMetric)
	if err != nil {
		return nil, fmt.Errorf("peer round-trip times: %w", err)
	}
	out := map[string]latency.Histogram{}
	for _, m := range families[peerRTTMetric].GetMetric() {
		if m.GetHistogram() == nil || label(m, "To") == "" {
			continue
		}
		out[label(m, "To")] = fromProto(m.GetHistogram())
	}
	return out, nil
}

// fromProto converts one histogram series, leaving out the +Inf bucket (Count holds it).
func fromProto(h *dto.Histogram) latency.Histogram {
	out := latency.Histogram{Count: h.GetSampleCount()}
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		out.Bounds = append(out.Bounds, b.GetUpperBound())
		out.Counts = append(out.Counts, b.GetCumulativeCount())
	}
	return out
}
