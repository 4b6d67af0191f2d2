package etcdclient

import (
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcd-autopilot/etcd-autopilot/internal/latency"
)

// etcd's histograms of the two disk writes every committed entry waits for: the WAL fsync before a
// member acknowledges an entry, and the backend commit that makes applied entries durable.
const (
	walFsyncMetric      = "etcd_disk_wal_fsync_duration_seconds"
	backendCommitMetric = "etcd_disk_backend_commit_duration_seconds"
)

// DiskLatency is a reading of one member's disk-latency histograms.
type DiskLatency struct {
	WALFsync, BackendCommit latency.Histogram
}

// ReadDiskLatency reads a member's disk-latency histograms from its metrics endpoint
// (http://host:port/metrics). They are cumulative since the member started: what one window says
// is the difference of two readings (latency.Histogram.Since).
func ReadDiskLatency(ctx context.Context, metricsURL string) (DiskLatency, error) {
	families, err := scrape(ctx, metricsURL, walFsyncMetric, backendCommitMetric)
	if err != nil {
		return DiskLatency{}, fmt.Errorf("disk latency: %w", err)
	}
	var d DiskLatency
	if d.WALFsync, err = histogram(families[walFsyncMetric]); err != nil {
		return DiskLatency{}, fmt.Errorf("disk latency from %s: %s: %w", metricsURL, walFsyncMetric, err)
	}
	if d.BackendCommit, err = histogram(families[backendCommitMetric]); err != nil {
		return DiskLatency{}, fmt.Errorf("disk latency from %s: %s: %w", metricsURL, backendCommitMetric, err)
	}
	return d, nil
}

// histogram converts the one unlabelled series of a histogram family.
func histogram(f *dto.MetricFamily) (latency.Histogram, error) {
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
		return latency.Histogram{}, fmt.Errorf("not one histogram series")
	}
	return fromProto(f.GetMetric()[0].GetHistogram()), nil
}
