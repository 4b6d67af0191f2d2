package etcdclient

import (
	"context"
	"fmt"
	"strconv"
)

// activePeersMetric is etcd's gauge of its raft stream connections: 1 for each peer it currently
// exchanges messages with, 0 once sending to that peer failed (rafthttp's peer status).
const activePeersMetric = "etcd_network_active_peers"

// PeerActivity reads, from one member's metrics endpoint (http://host:port/metrics), which peers that
// member currently reaches over raft: peer ID → active. It is etcd's own view of who is down, which
// is what a member removal must rest on; the operator failing to reach a member proves nothing.
// Peers the member never connected to since it started are absent.
func PeerActivity(ctx context.Context, metricsURL string, memberID uint64) (map[uint64]bool, error) {
	families, err := scrape(ctx, metricsURL, activePeersMetric)
	if err != nil {
		return nil, fmt.Errorf("peer activity: %w", err)
	}
	local := strconv.FormatUint(memberID, 16)
	out := map[uint64]bool{}
	for _, m := range families[activePeersMetric].GetMetric() {
		if label(m, "Local") != local {
			continue // embedded or proxied metrics of another member
		}
		remote, err := strconv.ParseUint(label(m, "Remote"), 16, 64)
		if err != nil {
			continue
		}
		out[remote] = m.GetGauge().GetValue() > 0
	}
	return out, nil
}
