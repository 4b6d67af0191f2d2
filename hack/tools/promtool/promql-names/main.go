// Command promql-names reads PromQL expressions, one JSON object {"name": …, "expr": …} per line on
// stdin, and prints for each {"name": …, "metrics": [the metric names it selects], "error": …}.
// It lives in the promtool tool module because Prometheus' parser pins Kubernetes libraries newer
// than the operator's; the operator's tests run it to check that every metric an alert names exists.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type query struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

type answer struct {
	Name    string   `json:"name"`
	Metrics []string `json:"metrics"`
	Error   string   `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var q query
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			fmt.Fprintln(os.Stderr, "promql-names:", err)
			os.Exit(2)
		}
		a := answer{Name: q.Name, Metrics: []string{}}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q.Expr)
		if err != nil {
			a.Error = err.Error()
		} else {
			seen := map[string]bool{}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					for _, m := range vs.LabelMatchers {
						if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
							seen[m.Value] = true
						}
					}
				}
				return nil
			})
			for name := range seen {
				a.Metrics = append(a.Metrics, name)
			}
			sort.Strings(a.Metrics)
		}
		if err := out.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, "promql-names:", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "promql-names:", err)
		os.Exit(2)
	}
}
