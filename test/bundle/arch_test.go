package bundle_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The CSV's operatorframework.io/arch.* and os.* labels claim exactly the platforms the operator image is
// built for: OPERATOR_PLATFORMS in hack/images/images.sh (test/images checks the image index itself).
func TestArchLabelsAreTheBuiltPlatforms(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "hack", "images", "images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^OPERATOR_PLATFORMS=\$\{OPERATOR_PLATFORMS:-([^}]*)\}`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("hack/images/images.sh sets no OPERATOR_PLATFORMS default")
	}
	var built []string
	for _, p := range strings.Fields(string(m[1])) {
		goos, goarch, _ := strings.Cut(p, "/")
		for _, l := range []string{"operatorframework.io/os." + goos, "operatorframework.io/arch." + goarch} {
			if !slices.Contains(built, l) {
				built = append(built, l)
			}
		}
	}
	var claimed []string
	for k, v := range loadBundle(t).CSV.Labels {
		if !strings.HasPrefix(k, "operatorframework.io/arch.") && !strings.HasPrefix(k, "operatorframework.io/os.") {
			continue
		}
		if v != "supported" {
			t.Errorf("label %s: %q, want supported (or no label)", k, v)
		}
		claimed = append(claimed, k)
	}
	slices.Sort(built)
	slices.Sort(claimed)
	if !slices.Equal(claimed, built) {
		t.Errorf("the CSV claims %v, the operator image is built for %v (OPERATOR_PLATFORMS)", claimed, built)
	}
}
