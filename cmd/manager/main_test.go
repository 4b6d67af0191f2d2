package main

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"
)

// WATCH_NAMESPACE comes from OLM's olm.targetNamespaces: empty in AllNamespaces mode, one name in
// OwnNamespace/SingleNamespace, a comma list in MultiNamespace.
func TestWatchNamespaces(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string // nil: every namespace
	}{
		{"", nil},
		{"  ", nil},
		{"team-a", []string{"team-a"}},
		{"team-a,team-b", []string{"team-a", "team-b"}},
		{" team-a , ,team-b,", []string{"team-a", "team-b"}},
	} {
		t.Setenv("WATCH_NAMESPACE", tc.env)
		got := watchNamespaces()
		if tc.want == nil {
			if got != nil {
				t.Errorf("WATCH_NAMESPACE=%q: want every namespace (nil), got %v", tc.env, got)
			}
			continue
		}
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, tc.want) {
			t.Errorf("WATCH_NAMESPACE=%q: got %v, want %v", tc.env, names, tc.want)
		}
	}
}

// The image the operator gives its Jobs and init containers must be the release's own image: the
// one `make bundle` and the images scripts name after VERSION in the Makefile.
func TestDefaultOperatorImageFollowsVersion(t *testing.T) {
	raw, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("no VERSION in the Makefile")
	}
	if want := "ghcr.io/etcd-autopilot/etcd-autopilot:v" + string(m[1]); defaultOperatorImage != want {
		t.Fatalf("defaultOperatorImage = %s, want %s", defaultOperatorImage, want)
	}
}

// The CSV's RELATED_IMAGE_OPERATOR (a digest when mirrored) reaches the pods the operator creates;
// OPERATOR_IMAGE, a development override, still wins.
func TestOperatorImageFromTheCSV(t *testing.T) {
	const pinned = "mirror.example/etcd-autopilot@sha256:0123"
	t.Setenv("OPERATOR_IMAGE", "")
	t.Setenv("RELATED_IMAGE_OPERATOR", pinned)
	if got := operatorImage(); got != pinned {
		t.Fatalf("with RELATED_IMAGE_OPERATOR: operatorImage() = %s, want %s", got, pinned)
	}
	t.Setenv("OPERATOR_IMAGE", "localhost/dev:latest")
	if got := operatorImage(); got != "localhost/dev:latest" {
		t.Fatalf("with OPERATOR_IMAGE: operatorImage() = %s, want the override", got)
	}
	t.Setenv("OPERATOR_IMAGE", "")
	t.Setenv("RELATED_IMAGE_OPERATOR", "")
	if got := operatorImage(); got != defaultOperatorImage {
		t.Fatalf("with neither: operatorImage() = %s, want %s", got, defaultOperatorImage)
	}
}

// ZONE_SETTLE: unset is the planner's default (0); a duration of a second or more is taken; anything
// else stops the operator with a message naming the variable.
func TestZoneSettle(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"30s", 30 * time.Second, true},
		{" 5m ", 5 * time.Minute, true},
		{"500ms", 0, false},
		{"-1m", 0, false},
		{"two minutes", 0, false},
	} {
		t.Setenv("ZONE_SETTLE", tc.env)
		got, err := zoneSettle()
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ZONE_SETTLE=%q: %s, %v; want %s, ok %t", tc.env, got, err, tc.want, tc.ok)
		}
	}
}
