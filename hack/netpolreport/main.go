// Command netpolreport turns the JUnit report of the upstream NetworkPolicy e2e tests (`make
// test-netpol-upstream`: bin/e2e.test --report-dir DIR writes DIR/junit_01.xml) into the pass/fail/skip list
// of docs/dev/netpol-conformance.md.
//
//	go run ./hack/netpolreport JUNIT.xml                 print the list (markdown)
//	go run ./hack/netpolreport -doc FILE JUNIT.xml       replace the list between FILE's markers
//
// The markers are the lines "<!-- netpol-report:begin -->" and "<!-- netpol-report:end -->"; everything
// else in FILE (the explanations, the out-of-scope notes) is kept as written.
package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

const (
	beginMarker = "<!-- netpol-report:begin -->"
	endMarker   = "<!-- netpol-report:end -->"
)

// the parts of Ginkgo's JUnit report (github.com/onsi/ginkgo/v2/reporters) the list needs
type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Text string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Text string `xml:",chardata"`
	} `xml:"error"`
}

// result is one spec of the report as the list shows it.
type result struct {
	Spec    string
	Outcome string // pass, FAIL, skip
	Seconds float64
	Note    string // why it failed or was skipped
}

func main() {
	doc := flag.String("doc", "", "markdown file whose list between the netpol-report markers is replaced (default: print)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: netpolreport [-doc FILE] JUNIT.xml")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *doc, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "netpolreport:", err)
		os.Exit(1)
	}
}

func run(junitFile, docFile string, out io.Writer) error {
	data, err := os.ReadFile(junitFile)
	if err != nil {
		return err
	}
	suites, err := parse(data)
	if err != nil {
		return fmt.Errorf("parse %s: %w", junitFile, err)
	}
	list := render(suites)
	if docFile == "" {
		_, err = io.WriteString(out, list)
		return err
	}
	old, err := os.ReadFile(docFile)
	if err != nil {
		return err
	}
	updated, err := replaceBetweenMarkers(string(old), list)
	if err != nil {
		return fmt.Errorf("%s: %w", docFile, err)
	}
	return os.WriteFile(docFile, []byte(updated), 0o644)
}

func parse(data []byte) (junitSuites, error) {
	var s junitSuites
	err := xml.Unmarshal(data, &s)
	if err == nil && len(s.Suites) == 0 {
		err = errors.New("no <testsuite> in the report")
	}
	return s, err
}

// results are the report's specs (the It nodes; the suite's own setup and report nodes only when they
// did not pass, since then every spec after them is in doubt), sorted by name.
func results(s junitSuites) []result {
	var rs []result
	for _, suite := range s.Suites {
		for _, c := range suite.Cases {
			spec, isIt := strings.CutPrefix(c.Name, "[It] ")
			if !isIt && c.Status == "passed" {
				continue
			}
			r := result{Spec: spec, Seconds: c.Time}
			switch c.Status {
			case "passed":
				r.Outcome = "pass"
			case "skipped", "pending":
				r.Outcome = "skip"
				if c.Skipped != nil {
					r.Note = strings.TrimPrefix(strings.TrimPrefix(c.Skipped.Message, "skipped"), " - ")
				}
				if r.Note == "" {
					r.Note = "not selected (--ginkgo.focus/--ginkgo.skip)"
				}
			default: // failed, panicked, interrupted, timedout, aborted
				r.Outcome = "FAIL"
				r.Note = c.Status
				if c.Failure != nil {
					r.Note = firstLine(c.Failure.Text, c.Status)
				} else if c.Error != nil {
					r.Note = firstLine(c.Error.Text, c.Status)
				}
			}
			rs = append(rs, r)
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Spec < rs[j].Spec })
	return rs
}

// firstLine is the first line of a failure that says something ("[FAILED] …"), or def.
func firstLine(text, def string) string {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "In [") {
			continue
		}
		return l
	}
	return def
}

func render(s junitSuites) string {
	rs := results(s)
	count := map[string]int{}
	for _, r := range rs {
		count[r.Outcome]++
	}
	var b bytes.Buffer
	stamp := s.Suites[0].Timestamp
	if stamp == "" {
		stamp = "unknown time"
	}
	fmt.Fprintf(&b, "Run of %s: **%d passed, %d failed, %d skipped** (%d specs).\n\n",
		stamp, count["pass"], count["FAIL"], count["skip"], len(rs))
	b.WriteString("| result | spec | seconds | note |\n|---|---|---:|---|\n")
	for _, outcome := range []string{"FAIL", "pass", "skip"} {
		for _, r := range rs {
			if r.Outcome != outcome {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s |\n", r.Outcome, cell(r.Spec), r.Seconds, cell(shorten(r.Note)))
		}
	}
	return b.String()
}

// cell makes text safe inside a markdown table cell: one line, no column separators.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

// shorten keeps a note to one readable line; the whole failure is in the report and the log.
func shorten(s string) string {
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}

func replaceBetweenMarkers(doc, list string) (string, error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q section", beginMarker, endMarker)
	}
	return doc[:i+len(beginMarker)] + "\n" + list + doc[j:], nil
}
