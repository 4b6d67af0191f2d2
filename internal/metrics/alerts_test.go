package metrics

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoringconfig"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

const (
	rulesFile = "../../config/prometheus/etcd_rules.yaml"
	rulesTest = "../../config/prometheus/tests/etcd_rules_test.yaml"
	// dashboardFile is the Grafana dashboard shipped as a ConfigMap by config/grafana.
	dashboardFile = "../../config/grafana/etcd-autopilot.json"
)

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// tool is a binary hack/tools/build.sh promtool links into bin/ (make test-unit builds it).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("../../bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run hack/tools/build.sh promtool (make test-unit does)", p)
	}
	return p
}

// groups reads the PrometheusRule's spec.groups: the plain rule file promtool and Prometheus load.
func groups(t *testing.T) (ruleGroups, []byte) {
	t.Helper()
	spec, err := monitoringconfig.RuleGroups(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := json.Unmarshal(spec, &g); err != nil {
		t.Fatal(err)
	}
	return g, spec
}

// TestAlertRules runs the promtool unit tests of every alert, and checks what each alert must carry.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool")
	g, spec := groups(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600); err != nil { // JSON is YAML
		t.Fatal(err)
	}
	cases, err := os.ReadFile(rulesTest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), cases, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	for _, gr := range g.Groups {
		for _, r := range gr.Rules {
			if r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["description"], "{{ $labels.namespace }}/{{ $labels.cluster }}") {
				t.Errorf("%s: needs a summary and a description naming {{ $labels.namespace }}/{{ $labels.cluster }}", r.Alert)
			}
			if !strings.HasSuffix(r.Annotations["runbook_url"], "/docs/runbooks/"+r.Alert+".md") {
				t.Errorf("%s: runbook_url %q does not point at docs/runbooks/%s.md", r.Alert, r.Annotations["runbook_url"], r.Alert)
			} else if _, err := os.Stat("../../docs/runbooks/" + r.Alert + ".md"); err != nil {
				t.Errorf("%s: %v", r.Alert, err)
			}
			if !bytes.Contains(cases, []byte("alertname: "+r.Alert+"\n")) {
				t.Errorf("%s has no promtool test case in %s", r.Alert, rulesTest)
			}
		}
	}
}

// TestAlertsAndDashboardNameOnlyExportedMetrics fails when an alert or a dashboard panel selects a
// metric nobody exports: the operator's own (this package), etcd's (scraped from a real embedded etcd
// after it served some requests), or Prometheus' own up. Expressions are parsed by Prometheus' parser
// (bin/promql-names); a panel's Grafana variables are replaced by sample values first.
func TestAlertsAndDashboardNameOnlyExportedMetrics(t *testing.T) {
	names := tool(t, "promql-names")
	exported := map[string]bool{"up": true}
	for _, c := range All {
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			n := strings.TrimPrefix(d.String(), `Desc{fqName: "`)
			n = n[:strings.IndexByte(n, '"')]
			for _, s := range []string{"", "_bucket", "_sum", "_count"} {
				exported[n+s] = true
			}
		}
	}
	for n := range etcdMetricNames(t) {
		exported[n] = true
	}

	t.Run("alerts", func(t *testing.T) {
		g, _ := groups(t)
		var exprs []namedExpr
		for _, gr := range g.Groups {
			for _, r := range gr.Rules {
				exprs = append(exprs, namedExpr{r.Alert, r.Expr})
			}
		}
		checkNamesExported(t, names, exprs, exported)
	})
	t.Run("dashboard", func(t *testing.T) {
		queries, err := monitoringconfig.DashboardQueries(dashboardFile)
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{"namespace": "ns", "cluster": "c", "__rate_interval": "1m"}
		var exprs []namedExpr
		for _, q := range queries {
			expr, err := monitoringconfig.ExpandVariables(q.Expr, vars)
			if err != nil {
				t.Errorf("panel %q: %v", q.Panel, err)
				continue
			}
			exprs = append(exprs, namedExpr{fmt.Sprintf("panel %q query %s", q.Panel, q.RefID), expr})
		}
		checkNamesExported(t, names, exprs, exported)
	})
}

type namedExpr struct{ name, expr string }

// checkNamesExported parses every expression with bin/promql-names and fails on a parse error or a
// selected metric that exported does not hold.
func checkNamesExported(t *testing.T, promqlNames string, exprs []namedExpr, exported map[string]bool) {
	t.Helper()
	var in bytes.Buffer
	for _, e := range exprs {
		line, _ := json.Marshal(map[string]string{"name": e.name, "expr": e.expr})
		in.Write(append(line, '\n'))
	}
	cmd := exec.Command(promqlNames)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promql-names: %v", err)
	}
	checked := 0
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var a struct {
			Name    string
			Metrics []string
			Error   string
		}
		if err := json.Unmarshal(line, &a); err != nil {
			t.Fatal(err)
		}
		if a.Error != "" {
			t.Errorf("%s: %s", a.Name, a.Error)
		}
		for _, m := range a.Metrics {
			checked++
			if !exported[m] {
				t.Errorf("%s names %s, which neither the operator nor etcd exports", a.Name, m)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no metric names checked")
	}
}

// etcdMetricNames scrapes a real etcd's /metrics after writes and reads, so histograms and gRPC
// counters have series. Three members, so the peer metrics (traffic, round trips) exist too.
func etcdMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	ms := etcdtest.StartCluster(t, 3)
	urls := etcdtest.ClientURLs(ms)
	c, err := clientv3.New(clientv3.Config{Endpoints: urls})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	for range 3 {
		if _, err := c.Put(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	// etcd's peer prober observes its first round trips a few seconds after start.
	const lastToAppear = "etcd_network_peer_round_trip_time_seconds_bucket"
	var out map[string]bool
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out = scrapeNames(t, urls[0]+"/metrics")
		if out[lastToAppear] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s from etcd's /metrics after 20 s", lastToAppear)
		}
	}
	if len(out) < 50 {
		t.Fatalf("only %d metric names from etcd's /metrics", len(out))
	}
	return out
}

// scrapeNames returns the metric names of the series at url.
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]bool{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		out[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return out
}
