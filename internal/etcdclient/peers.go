package etcdclient

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// activePeersMetric is etcd's gauge of its raft stream connections: 1 for each peer it currently
// exchanges messages with, 0 once sending to that peer failed (rafthttp's peer status).
const activePeersMetric = "etcd_network_active_peers"

// PeerActivity reads, from one member's metrics endpoint (http://host:port/metrics), which peers that
// member currently reaches over raft: peer ID → active. It is etcd's own view of who is down, which
// is what a member removal must rest on; the operator failing to reach a member proves nothing.
// Peers the member never connected to since it started are absent.
func PeerActivity(ctx context.Context, metricsURL string, memberID uint64) (map[uint64]bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("peer activity from %s: %w", metricsURL, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("peer activity from %s: %w", metricsURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("peer activity from %s: HTTP %d", metricsURL, resp.StatusCode)
	}
	local := strconv.FormatUint(memberID, 16)
	out := map[uint64]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, activePeersMetric+"{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, activePeersMetric+"{"), "} ")
		if !ok || labelValue(labels, "Local") != local {
			continue // embedded or proxied metrics of another member
		}
		remote, err := strconv.ParseUint(labelValue(labels, "Remote"), 16, 64)
		if err != nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		out[remote] = v > 0
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("peer activity from %s: %w", metricsURL, err)
	}
	return out, nil
}

// labelValue returns the value of label name in a Prometheus text label set (a="x",b="y").
func labelValue(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
