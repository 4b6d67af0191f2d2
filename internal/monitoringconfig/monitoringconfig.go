// Package monitoringconfig reads the monitoring files the project ships — the PrometheusRule and the
// members' ServiceMonitor in config/prometheus, the Grafana dashboard in config/grafana — in the shape
// the tests that check them need: the rule file Prometheus loads, the scrape relabelings, and every
// panel's query. The tests read the shipped files rather than copies, so what they prove holds for
// what users install.
package monitoringconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"

	"sigs.k8s.io/yaml"
)

// RuleGroups returns spec.groups of the PrometheusRule at path as a JSON object {"groups": […]}: the
// rule file that promtool and Prometheus load (JSON is YAML).
func RuleGroups(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		return nil, fmt.Errorf("parse PrometheusRule %s: %w", path, err)
	}
	if len(pr.Spec) == 0 {
		return nil, fmt.Errorf("PrometheusRule %s has no spec", path)
	}
	return pr.Spec, nil
}

// Relabeling is one relabeling of a ServiceMonitor endpoint (the Prometheus Operator's field names).
type Relabeling struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// Endpoint is one scraped port of a ServiceMonitor.
type Endpoint struct {
	Port        string       `json:"port"`
	Path        string       `json:"path,omitempty"`
	Scheme      string       `json:"scheme,omitempty"`
	HonorLabels bool         `json:"honorLabels,omitempty"`
	Relabelings []Relabeling `json:"relabelings,omitempty"`
}

// ServiceMonitor is the part of a ServiceMonitor that decides which targets exist and their labels.
type ServiceMonitor struct {
	// Selector are the labels a Service must carry (spec.selector.matchLabels).
	Selector  map[string]string
	Endpoints []Endpoint
}

// ReadServiceMonitor reads the ServiceMonitor at path; it refuses selectors this reader cannot
// represent (matchExpressions), so a test never scrapes other targets than the shipped object would.
func ReadServiceMonitor(path string) (ServiceMonitor, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ServiceMonitor{}, err
	}
	var sm struct {
		Kind string `json:"kind"`
		Spec struct {
			Selector struct {
				MatchLabels      map[string]string `json:"matchLabels"`
				MatchExpressions []json.RawMessage `json:"matchExpressions"`
			} `json:"selector"`
			Endpoints []Endpoint `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &sm); err != nil {
		return ServiceMonitor{}, fmt.Errorf("parse ServiceMonitor %s: %w", path, err)
	}
	if sm.Kind != "ServiceMonitor" || len(sm.Spec.Selector.MatchExpressions) > 0 || len(sm.Spec.Endpoints) == 0 {
		return ServiceMonitor{}, fmt.Errorf("%s: want a ServiceMonitor with matchLabels only and at least one endpoint", path)
	}
	return ServiceMonitor{Selector: sm.Spec.Selector.MatchLabels, Endpoints: sm.Spec.Endpoints}, nil
}

// Query is one query of a dashboard panel.
type Query struct {
	Panel string // the panel's title
	RefID string
	Expr  string
}

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row holds its panels
}

// DashboardQueries returns every query of every panel of the Grafana dashboard at path, in order,
// including the panels inside collapsed rows. A panel without a query (other than a row) is an error:
// it would show nothing.
func DashboardQueries(path string) ([]Query, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("parse dashboard %s: %w", path, err)
	}
	var out []Query
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type == "row" {
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if len(p.Targets) == 0 {
				return fmt.Errorf("dashboard %s: panel %q has no query", path, p.Title)
			}
			for _, t := range p.Targets {
				if t.Expr == "" {
					return fmt.Errorf("dashboard %s: panel %q query %s is empty", path, p.Title, t.RefID)
				}
				out = append(out, Query{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

var variable = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// ExpandVariables replaces Grafana's $name and ${name} in expr by vars[name], as Grafana does before it
// sends a query; it fails on a variable vars does not define, so no query reaches Prometheus half expanded.
func ExpandVariables(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := variable.ReplaceAllStringFunc(expr, func(v string) string {
		m := variable.FindStringSubmatch(v)
		name := m[1] + m[2]
		val, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return v
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("undefined variables %v in %q", missing, expr)
	}
	return out, nil
}
