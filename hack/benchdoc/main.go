// Command benchdoc regenerates the head of BENCHMARKS.md (the table and the notes on each figure)
// from the committed bench/results/*.json, without measuring anything; the sections the suites own
// are kept. Run from the repository root: go run ./hack/benchdoc
package main

import (
	"fmt"
	"os"

	"github.com/etcd-autopilot/etcd-autopilot/test/benchdoc"
)

func main() {
	if err := benchdoc.Write("BENCHMARKS.md", "bench/results", ""); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}
