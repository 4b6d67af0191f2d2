package benchdoc

import (
	"strings"
	"testing"
)

func TestRowRatioOnlyWithABaseline(t *testing.T) {
	goal := 128.0
	one := 1.0
	for _, c := range []struct {
		name string
		r    Result
		want string
	}{
		{"a count has no ratio and its goal in its unit",
			Result{Metric: "scale_operator_rss_mib_100", Value: 114.48, Unit: "MiB", Ratio: 114.48, Goal: &goal, Samples: []float64{114.48}, Date: "2026-11-27T17:00:00Z"},
			"| `scale_operator_rss_mib_100` | 114.48 MiB | — | — | ≤ 128 MiB | 1 | 2026-11-27 |"},
		{"a measured baseline gives a ratio",
			Result{Metric: "time_to_available_3", Value: 8.1, Unit: "s", Baseline: 6.31, Ratio: 1.28, Goal: &one, Samples: []float64{7.3, 8.1, 8.35}, BaselineSamples: []float64{4.97, 6.31, 7.11}, Date: "2026-11-27"},
			"| `time_to_available_3` | 8.10 s (7.30–8.35) | 6.31 s (4.97–7.11) | 1.28× | ≤ 1× | 3 | 2026-11-27 |"},
		{"a fixed baseline gives a ratio",
			Result{Metric: "backup_job_peak_memory_mib", Value: 23.45, Unit: "MiB", Baseline: 64, Ratio: 0.37, Goal: &one, Samples: []float64{23.21, 23.45}, Date: "2026-11-27"},
			"| `backup_job_peak_memory_mib` | 23.45 MiB (23.21–23.45) | 64.00 MiB (fixed) | 0.37× | ≤ 1× | 2 | 2026-11-27 |"},
		{"a figure without samples shows no run count",
			Result{Metric: "chaos_operations", Value: 262941, Unit: "count", Ratio: 262941, Date: "2026-11-23"},
			"| `chaos_operations` | 262941.00 count | — | — | — | — | 2026-11-23 |"},
	} {
		if got := Row(c.r); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestRenderKeepsTheMachine(t *testing.T) {
	out := Render(nil, "2 vCPU")
	if MachineLine(out) != "2 vCPU" {
		t.Fatalf("machine line lost:\n%s", out)
	}
	if !strings.Contains(out, "docs/dev/benchmarking.md") {
		t.Error("the head should link the method")
	}
}
