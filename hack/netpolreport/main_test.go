package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	data, err := os.ReadFile("testdata/junit_01.xml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parse(data)
	if err != nil {
		t.Fatal(err)
	}
	got := render(s)
	want := `Run of 2026-11-29T04:00:00: **1 passed, 1 failed, 1 skipped** (3 specs).

| result | spec | seconds | note |
|---|---|---:|---|
| FAIL | [sig-network] Netpol NetworkPolicy between server and client should deny egress from all pods in a namespace [Feature:NetworkPolicy] | 181 | [FAILED] Had 9 wrong results in reachability matrix \| x |
| pass | [sig-network] Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy [Feature:NetworkPolicy] | 120 |  |
| skip | [sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should support a 'default-deny-ingress' policy [Feature:NetworkPolicy] | 0 | not selected (--ginkgo.focus/--ginkgo.skip) |
`
	if got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
}

func TestFailedSuiteNodeIsListed(t *testing.T) {
	s, err := parse([]byte(`<testsuites><testsuite timestamp="t"><testcase name="[SynchronizedBeforeSuite]" status="failed" time="300"><failure type="failed">[FAILED] wait for all nodes Ready</failure></testcase></testsuite></testsuites>`))
	if err != nil {
		t.Fatal(err)
	}
	rs := results(s)
	if len(rs) != 1 || rs[0].Outcome != "FAIL" || rs[0].Spec != "[SynchronizedBeforeSuite]" || rs[0].Note != "[FAILED] wait for all nodes Ready" {
		t.Errorf("results = %+v", rs)
	}
}

func TestDocMarkers(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "doc.md")
	head, tail := "# T\n\nintro\n\n"+beginMarker+"\n", endMarker+"\n\nafter\n"
	if err := os.WriteFile(doc, []byte(head+"old list\n"+tail), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("testdata/junit_01.xml", doc, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(doc)
	got := string(b)
	if !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) || strings.Contains(got, "old list") || !strings.Contains(got, "1 failed") {
		t.Errorf("doc after run:\n%s", got)
	}
	if _, err := replaceBetweenMarkers("no markers", "x"); err == nil {
		t.Error("a doc without markers was accepted")
	}
}
