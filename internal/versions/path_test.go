package versions

import (
	"strings"
	"testing"
)

func TestPathsBetweenEverySupportedPair(t *testing.T) {
	want := map[[2]string]string{
		{"3.5.35", "3.5.35"}: "3.5.35",
		{"3.5.35", "3.6.16"}: "3.5.35 3.6.16",
		{"3.5.35", "3.7.3"}:  "3.5.35 3.6.16 3.7.3",
		{"3.6.16", "3.7.3"}:  "3.6.16 3.7.3",
		{"3.6.16", "3.6.16"}: "3.6.16",
		{"3.7.3", "3.7.3"}:   "3.7.3",
		{"3.6.16", "3.5.35"}: "3.6.16 3.5.35", // etcd's downgrade API, one minor
		{"3.7.3", "3.6.16"}:  "3.7.3 3.6.16",
	}
	refused := map[[2]string]string{
		{"3.7.3", "3.5.35"}: "set spec.version to 3.6.16 first",
	}
	for _, from := range Supported {
		for _, to := range Supported {
			got, err := Path(from, to)
			if reason, ok := refused[[2]string{from, to}]; ok {
				if err == nil || !strings.Contains(err.Error(), reason) {
					t.Errorf("%s -> %s: %v, %v; want refusal mentioning %q", from, to, got, err, reason)
				}
				continue
			}
			if err != nil || strings.Join(got, " ") != want[[2]string{from, to}] {
				t.Errorf("%s -> %s = %v, %v; want %s", from, to, got, err, want[[2]string{from, to}])
			}
		}
	}
}

func TestFloorsAndOddInputs(t *testing.T) {
	for _, tc := range []struct{ cur, target, want, err string }{
		{"3.5.10", "3.6.16", "3.5.35", ""},       // below the 3.5 floor: newest 3.5 first
		{"3.6.4", "3.7.3", "3.6.16", ""},         // below the 3.6 floor
		{"3.5.35", "3.6.1", "", "not supported"}, // no image
		{"3.6.20", "3.6.16", "3.6.16", ""},       // patch downgrade is fine
		{"3.6.16", "4.0.0", "", "not supported"}, // unknown major
		{"3.5.35", "3.7.3", "3.6.16", ""},        // skip-minor upgrade steps through 3.6
	} {
		got, err := NextStep(tc.cur, tc.target)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s -> %s: %q, %v; want error %q", tc.cur, tc.target, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s -> %s = %q, %v; want %q", tc.cur, tc.target, got, err, tc.want)
		}
	}
}

func TestMinorDowngradeAndMinorOf(t *testing.T) {
	for _, tc := range []struct {
		cur, next string
		want      bool
	}{{"3.6.16", "3.5.35", true}, {"3.7.3", "3.6.16", true}, {"3.6.16", "3.6.4", false}, {"3.5.35", "3.6.16", false}, {"bad", "3.5.35", false}} {
		if got := IsMinorDowngrade(tc.cur, tc.next); got != tc.want {
			t.Errorf("IsMinorDowngrade(%s, %s) = %v", tc.cur, tc.next, got)
		}
	}
	if got := MinorOf("3.5.35"); got != "3.5.0" {
		t.Errorf("MinorOf = %q", got)
	}
}
