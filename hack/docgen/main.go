// Command docgen writes docs/conditions-and-events.md: every condition type and every condition or
// event reason the operator emits, with what it means and what to do, read from the Go sources so
// that the page cannot drift from the code. Run it from the repository root: go run ./hack/docgen.
//
// The reasons and their documentation come from internal/reason (one file per kind); where each
// reason appears (which condition, which event type) comes from the calls that set conditions and
// record events in the packages of internal/controller/, internal/planner/ and internal/backup/, and
// from the tables of stops in internal/reason (reason.Stop) for the reasons the controller reads
// from the planner's action and reports on a condition of their own.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// Output is where the page goes, relative to the repository root.
const Output = "docs/conditions-and-events.md"

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	page, problems, err := Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "docgen:", p)
	}
	if err := os.WriteFile(filepath.Join(*root, Output), page, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// Generate renders the page from the sources under root, and lists what keeps it from being
// complete: reasons written as string literals instead of internal/reason constants, and constants
// nothing uses.
func Generate(root string) ([]byte, []string, error) {
	reasons, stops, err := readReasons(filepath.Join(root, "internal", "reason"))
	if err != nil {
		return nil, nil, err
	}
	condDirs := []string{filepath.Join(root, "api", "v1alpha1")}
	for pkg := range controllerPackages {
		condDirs = append(condDirs, filepath.Join(root, controllerDir, pkg))
	}
	conds, err := readConditionTypes(condDirs...)
	if err != nil {
		return nil, nil, err
	}
	uses, problems, err := readUses(root, conds)
	if err != nil {
		return nil, nil, err
	}
	problems = append(problems, uses.addStops(stops, reasons, conds)...)
	for _, r := range reasons {
		if len(uses.reasons[r.Name]) == 0 {
			problems = append(problems, fmt.Sprintf("reason.%s is documented but nothing emits it: use it or delete it", r.Name))
		}
	}
	return render(reasons, conds, uses), problems, nil
}
