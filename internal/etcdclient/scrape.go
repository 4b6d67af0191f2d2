package etcdclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeClient is http.DefaultClient's transport (proxy settings included) without keep-alive. The
// operator reads each member's metrics every few tens of seconds; a connection kept idle between
// reads held ~10 KiB of heap and two goroutines per member for as long as the operator ran
// (TestClientMemoryPerCluster), against one TCP handshake per read.
var scrapeClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	return &http.Client{Transport: t}
}()

// scrape reads a member's metrics endpoint (http://host:port/metrics, plain text) and keeps the
// families named in want. Members serve their metrics without TLS on a port the NetworkPolicy opens
// only to the operator and monitoring.
func scrape(ctx context.Context, metricsURL string, want ...string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, memberTimeout)
	defer cancel()
	defer func(start time.Time) { traceCall(ctx, "scrape "+metricsURL, time.Since(start)) }(time.Now())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", metricsURL, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", metricsURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", metricsURL, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", metricsURL, err)
	}
	out := make(map[string]*dto.MetricFamily, len(want))
	for _, name := range want {
		if f := families[name]; f != nil {
			out[name] = f
		}
	}
	return out, nil
}

// label returns the value of label name on m, "" when it has none.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
