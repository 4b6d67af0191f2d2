package monitoringconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpandVariables(t *testing.T) {
	vars := map[string]string{"namespace": "ns1", "cluster": "main", "__rate_interval": "1m"}
	for _, tc := range []struct{ in, want, err string }{
		{in: `up{namespace="$namespace", cluster="${cluster}"}`, want: `up{namespace="ns1", cluster="main"}`},
		{in: `rate(x{cluster="$cluster"}[$__rate_interval])`, want: `rate(x{cluster="main"}[1m])`},
		{in: `x{namespace="$namespaces"}`, err: "namespaces"}, // a longer name is another variable
		{in: `x{member="$member"}`, err: "member"},
		{in: `sum(x)`, want: `sum(x)`},
	} {
		got, err := ExpandVariables(tc.in, vars)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one naming %s", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestDashboardQueriesReadsCollapsedRowsAndRefusesEmptyPanels(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "d.json")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	qs, err := DashboardQueries(write(`{"panels": [
		{"type": "row", "title": "open", "panels": []},
		{"type": "stat", "title": "a", "targets": [{"refId": "A", "expr": "up"}, {"refId": "B", "expr": "x"}]},
		{"type": "row", "title": "collapsed", "collapsed": true, "panels": [
			{"type": "timeseries", "title": "b", "targets": [{"refId": "A", "expr": "y"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 3 || qs[0] != (Query{"a", "A", "up"}) || qs[1].Expr != "x" || qs[2] != (Query{"b", "A", "y"}) {
		t.Fatalf("queries %+v", qs)
	}
	if _, err := DashboardQueries(write(`{"panels": [{"type": "stat", "title": "nothing"}]}`)); err == nil || !strings.Contains(err.Error(), "nothing") {
		t.Fatalf("a panel without a query: %v", err)
	}
}

// The shipped files parse into what the tests use.
func TestShippedFiles(t *testing.T) {
	if spec, err := RuleGroups("../../config/prometheus/etcd_rules.yaml"); err != nil || !strings.HasPrefix(string(spec), `{"groups":`) {
		t.Fatalf("rules: %.40s, %v", spec, err)
	}
	sm, err := ReadServiceMonitor("../../config/prometheus/etcd_monitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sm.Selector["app.kubernetes.io/managed-by"] != "etcd-autopilot" || len(sm.Endpoints) != 1 || sm.Endpoints[0].Port != "metrics" || len(sm.Endpoints[0].Relabelings) == 0 {
		t.Fatalf("members' ServiceMonitor %+v", sm)
	}
	if qs, err := DashboardQueries("../../config/grafana/etcd-autopilot.json"); err != nil || len(qs) < 20 {
		t.Fatalf("dashboard: %d queries, %v", len(qs), err)
	}
}
