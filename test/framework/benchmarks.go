package framework

import "github.com/etcd-autopilot/etcd-autopilot/test/benchdoc"

// SectionMarker starts a section of BENCHMARKS.md that one benchmark owns (see test/benchdoc).
const SectionMarker = benchdoc.SectionMarker

// WriteBenchmarksSection replaces (or appends) the section named name of the BENCHMARKS.md at path.
func WriteBenchmarksSection(path, name, body string) error {
	return benchdoc.WriteSection(path, name, body)
}

// BenchResult is one figure as bench/results/<metric>.json holds it.
type BenchResult = benchdoc.Result
