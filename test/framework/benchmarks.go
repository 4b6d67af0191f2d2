package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SectionMarker starts a section of BENCHMARKS.md that one benchmark owns; the generated head of
// the file (test/bench) keeps every section as it is.
const SectionMarker = "<!-- section: "

// WriteBenchmarksSection replaces (or appends) the section named name of the BENCHMARKS.md at path.
func WriteBenchmarksSection(path, name, body string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := SectionMarker+name+" -->\n", "<!-- end section: "+name+" -->\n"
	text := string(old)
	if i := strings.Index(text, begin); i >= 0 {
		if j := strings.Index(text[i:], end); j >= 0 {
			text = text[:i] + text[i+j+len(end):]
		}
	}
	text = strings.TrimRight(text, "\n") + "\n\n" + begin + body + end
	return os.WriteFile(path, []byte(text), 0o644)
}

// BenchResult is one figure as bench/results/<metric>.json holds it: a count has no baseline and
// its ratio is the count.
type BenchResult struct {
	Metric          string    `json:"metric"`
	Value           float64   `json:"value"`
	Unit            string    `json:"unit"`
	Baseline        float64   `json:"baseline"`
	Ratio           float64   `json:"ratio"`
	Date            string    `json:"date"`
	Command         string    `json:"command"`
	Notes           string    `json:"notes"`
	Goal            *float64  `json:"goal,omitempty"`
	Samples         []float64 `json:"samples"`
	BaselineSamples []float64 `json:"baseline_samples"`
	// Min and Max bound the samples (and BaselineMin/BaselineMax the baseline's): a median says little
	// without its spread.
	// Seed is a random seed exactly (Value, a float64, keeps only 15–17 of its digits).
	Seed        string  `json:"seed,omitempty"`
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
	BaselineMin float64 `json:"baseline_min,omitempty"`
	BaselineMax float64 `json:"baseline_max,omitempty"`
}

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
