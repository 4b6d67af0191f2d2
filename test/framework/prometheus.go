package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoringconfig"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
)

// PromScrapeInterval is how often the test's Prometheus scrapes and evaluates its rules: short, so
// alerts move within seconds.
const PromScrapeInterval = 2 * time.Second

// PrometheusConfig says what a test's Prometheus scrapes and which rules it evaluates.
type PrometheusConfig struct {
	// Namespace is the test's namespace: member targets are discovered there only.
	Namespace string
	// Members is the members' ServiceMonitor as shipped (monitoringconfig.ReadServiceMonitor).
	Members monitoringconfig.ServiceMonitor
	// OperatorAddr is the host:port where the test's operator serves plain-HTTP metrics
	// (StartOperatorServingMetrics).
	OperatorAddr string
	// Rules is a rule file's content ({"groups": …}).
	Rules []byte
}

// Prometheus is a Prometheus server (bin/prometheus, built from its Go module by
// `hack/tools/build.sh promtool`) running on the host for one test: it reaches pod IPs directly, as
// the operator does, and stops when the test ends.
type Prometheus struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	logs lockedWriter
}

// StartPrometheus writes cfg as a Prometheus configuration and runs Prometheus on it until the test ends.
func (e *Env) StartPrometheus(t *testing.T, cfg PrometheusConfig) *Prometheus {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(e.root, "bin", "prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run hack/tools/build.sh promtool (make test-e2e does)", bin)
	}
	dir := t.TempDir()
	conf, err := prometheusConfig(cfg, e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"prometheus.yml": conf, "rules.yml": cfg.Rules} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := loopback.FreeAddr(t)
	p := &Prometheus{URL: "http://" + addr, done: make(chan struct{}), logs: lockedWriter{&sync.Mutex{}, &bytes.Buffer{}}}
	p.cmd = exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start Prometheus: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		interruptThenKill(p.cmd.Process, p.done)
		if t.Failed() {
			t.Logf("Prometheus log (last 8k):\n%s", p.Logs())
		}
	})
	WaitFor(t, "Prometheus ready", time.Minute, func() error {
		select {
		case <-p.done:
			t.Fatalf("Prometheus exited:\n%s", p.Logs())
		default:
		}
		return p.get(context.Background(), "/-/ready", nil, nil)
	})
	return p
}

// Logs is the tail of what Prometheus wrote.
func (p *Prometheus) Logs() string {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	return tail(p.logs.buf.String(), 8192)
}

// prometheusConfig is the configuration the Prometheus Operator would generate for the shipped members'
// ServiceMonitor (kubernetes_sd endpoints role: the Service-label and port filters, then its standard
// target labels, then the ServiceMonitor's own relabelings, verbatim), plus a static job for the operator
// (honor_labels, as the shipped operator ServiceMonitor has).
func prometheusConfig(cfg PrometheusConfig, kubeconfig string) ([]byte, error) {
	interval := PromScrapeInterval.String()
	scrapes := []any{map[string]any{
		"job_name":     "etcd-autopilot-operator",
		"honor_labels": true,
		"static_configs": []any{map[string]any{
			"targets": []string{cfg.OperatorAddr},
		}},
	}}
	for i, ep := range cfg.Members.Endpoints {
		relabel := []any{}
		for _, k := range slices.Sorted(maps.Keys(cfg.Members.Selector)) {
			v, name := cfg.Members.Selector[k], sanitizeLabelName(k)
			relabel = append(relabel, map[string]any{
				"action":        "keep",
				"source_labels": []string{"__meta_kubernetes_service_label_" + name, "__meta_kubernetes_service_labelpresent_" + name},
				"regex":         "(" + regexp.QuoteMeta(v) + ");true",
			})
		}
		relabel = append(relabel,
			map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_endpoint_port_name"}, "regex": ep.Port},
			map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "service"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job"},
			map[string]any{"target_label": "endpoint", "replacement": ep.Port},
		)
		for _, r := range ep.Relabelings {
			relabel = append(relabel, relabelConfig(r))
		}
		path, scheme := ep.Path, ep.Scheme
		if path == "" {
			path = "/metrics"
		}
		if scheme == "" {
			scheme = "http"
		}
		scrapes = append(scrapes, map[string]any{
			"job_name":     fmt.Sprintf("serviceMonitor/%s/etcd-members/%d", cfg.Namespace, i),
			"honor_labels": ep.HonorLabels,
			"metrics_path": path,
			"scheme":       scheme,
			"kubernetes_sd_configs": []any{map[string]any{
				"role":            "endpoints",
				"kubeconfig_file": kubeconfig,
				"namespaces":      map[string]any{"names": []string{cfg.Namespace}},
			}},
			"relabel_configs": relabel,
		})
	}
	conf := map[string]any{
		"global": map[string]any{
			"scrape_interval":     interval,
			"scrape_timeout":      interval,
			"evaluation_interval": interval,
		},
		"rule_files":     []string{"rules.yml"},
		"scrape_configs": scrapes,
	}
	return json.Marshal(conf) // JSON is YAML
}

// relabelConfig turns a ServiceMonitor relabeling into Prometheus' relabel_config (field names only).
func relabelConfig(r monitoringconfig.Relabeling) map[string]any {
	out := map[string]any{}
	if len(r.SourceLabels) > 0 {
		out["source_labels"] = r.SourceLabels
	}
	if r.Separator != nil {
		out["separator"] = *r.Separator
	}
	if r.TargetLabel != "" {
		out["target_label"] = r.TargetLabel
	}
	if r.Regex != "" {
		out["regex"] = r.Regex
	}
	if r.Replacement != nil {
		out["replacement"] = *r.Replacement
	}
	if r.Action != "" {
		out["action"] = strings.ToLower(r.Action)
	}
	return out
}

// sanitizeLabelName is how Kubernetes service discovery turns a Kubernetes label into a meta label name.
func sanitizeLabelName(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, k)
}

// Alert is one active alert (pending or firing) as /api/v1/alerts reports it.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// Alerts are the active alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}

// FindAlert is alert name of one cluster, firing rather than pending when both are active, or nil
// when it is not active.
func (p *Prometheus) FindAlert(ctx context.Context, name, namespace, cluster string) (*Alert, error) {
	alerts, err := p.Alerts(ctx)
	if err != nil {
		return nil, err
	}
	var found *Alert
	for i, a := range alerts {
		if a.Labels["alertname"] == name && a.Labels["namespace"] == namespace && a.Labels["cluster"] == cluster {
			if found == nil || a.State == "firing" {
				found = &alerts[i]
			}
		}
	}
	return found, nil
}

// AlertState is the state of alert name for one cluster: "firing", "pending", or "" when not active.
func (p *Prometheus) AlertState(ctx context.Context, name, namespace, cluster string) (string, error) {
	a, err := p.FindAlert(ctx, name, namespace, cluster)
	if err != nil || a == nil {
		return "", err
	}
	return a.State, nil
}

// Sample is one series of an instant query's result.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Query runs an instant query and returns its samples (a scalar result is one sample without labels).
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	type point [2]any // [unix time, "value"]
	parse := func(pt point) (float64, error) {
		s, ok := pt[1].(string)
		if !ok {
			return 0, fmt.Errorf("value %v is not a string", pt[1])
		}
		return strconv.ParseFloat(s, 64)
	}
	var out []Sample
	switch data.ResultType {
	case "vector":
		var vs []struct {
			Metric map[string]string `json:"metric"`
			Value  point             `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vs); err != nil {
			return nil, err
		}
		for _, v := range vs {
			f, err := parse(v.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Metric: v.Metric, Value: f})
		}
	case "scalar":
		var v point
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, err
		}
		f, err := parse(v)
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Value: f})
	default:
		return nil, fmt.Errorf("query %q: result type %q", expr, data.ResultType)
	}
	return out, nil
}

// Defined are the samples whose value is a number (histogram_quantile over no observations is NaN).
func Defined(samples []Sample) []Sample {
	var out []Sample
	for _, s := range samples {
		if !math.IsNaN(s.Value) {
			out = append(out, s)
		}
	}
	return out
}

// get fetches path and decodes the "data" of Prometheus' API envelope into out (when out is not nil).
func (p *Prometheus) get(ctx context.Context, path string, q url.Values, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := p.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if resp.StatusCode != http.StatusOK && out == nil {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}
