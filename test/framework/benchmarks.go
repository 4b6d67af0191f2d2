package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/etcd-autopilot/etcd-autopilot/test/benchdoc"
)

// SectionMarker starts a section of BENCHMARKS.md that one benchmark owns (see test/benchdoc).
const SectionMarker = benchdoc.SectionMarker

// WriteBenchmarksSection replaces (or appends) the section named name of the BENCHMARKS.md at path.
func WriteBenchmarksSection(path, name, body string) error {
	return benchdoc.WriteSection(path, name, body)
}

// BenchResult is one figure as bench/results/<metric>.json holds it (test/benchdoc).
type BenchResult = benchdoc.Result

// WriteBenchResult writes dir/<metric>.json: the one writer of every bench result, so each file
// there comes from a run.
func WriteBenchResult(dir string, r BenchResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, r.Metric+".json"), append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", r.Metric, err)
	}
	return nil
}

// BenchCommand is the command that reproduces a result: the environment variables of env that are
// set (in that order, as they were), then command with its -run pattern. A result recorded with
// settings its command does not name cannot be reproduced.
func BenchCommand(env []string, command string) string {
	var set []string
	for _, name := range env {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			set = append(set, name+"="+v)
		}
	}
	return strings.TrimSpace(strings.Join(set, " ") + " " + command)
}

// Median is the middle of xs (the mean of the two middle ones for an even count).
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Round2 keeps two decimals: a figure's finer digits are the machine's noise.
func Round2(x float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 2, 64), 64)
	return f
}
