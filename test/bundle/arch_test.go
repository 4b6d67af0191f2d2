package bundle_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// builtPlatforms is the default of OPERATOR_PLATFORMS in hack/images/images.sh ("linux/amd64", …): what
// the operator image is built for (test/images checks the image index itself).
func builtPlatforms(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "hack", "images", "images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^OPERATOR_PLATFORMS=\$\{OPERATOR_PLATFORMS:-([^}]*)\}`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("hack/images/images.sh sets no OPERATOR_PLATFORMS default")
	}
	return strings.Fields(string(m[1]))
}

// The CSV's operatorframework.io/arch.* and os.* labels claim exactly the platforms the operator image is
// built for: OPERATOR_PLATFORMS in hack/images/images.sh.
func TestArchLabelsAreTheBuiltPlatforms(t *testing.T) {
	var built []string
	for _, p := range builtPlatforms(t) {
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

// The operator's pod is scheduled only onto nodes of those platforms (what the multiarch validator
// looks for): its required node affinity names the same arches and OSes as the labels.
func TestOperatorRunsOnlyOnItsPlatforms(t *testing.T) {
	b := loadBundle(t)
	want := map[string][]string{}
	for k := range b.CSV.Labels {
		if a, ok := strings.CutPrefix(k, "operatorframework.io/arch."); ok {
			want["kubernetes.io/arch"] = append(want["kubernetes.io/arch"], a)
		}
		if o, ok := strings.CutPrefix(k, "operatorframework.io/os."); ok {
			want["kubernetes.io/os"] = append(want["kubernetes.io/os"], o)
		}
	}
	for _, d := range b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		aff := d.Spec.Template.Spec.Affinity
		if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
			len(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 {
			t.Errorf("deployment %s: want one required node selector term on kubernetes.io/arch and kubernetes.io/os", d.Name)
			continue
		}
		got := map[string][]string{}
		for _, e := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions {
			if e.Operator != "In" {
				t.Errorf("deployment %s: %s %s, want In", d.Name, e.Key, e.Operator)
			}
			got[e.Key] = append(got[e.Key], e.Values...)
		}
		for _, k := range []string{"kubernetes.io/arch", "kubernetes.io/os"} {
			slices.Sort(got[k])
			slices.Sort(want[k])
			if !slices.Equal(got[k], want[k]) {
				t.Errorf("deployment %s runs on %s %v, the CSV claims %v", d.Name, k, got[k], want[k])
			}
		}
	}
}

// The operator holds the pods it creates that run its image (Jobs, the archive worker, members' init
// containers) to the architectures of versions.OperatorArches, the list built into it: the
// architectures of OPERATOR_PLATFORMS, no more and no fewer.
func TestOperatorKnowsItsImagesArchitectures(t *testing.T) {
	var built []string
	for _, p := range builtPlatforms(t) {
		if _, arch, _ := strings.Cut(p, "/"); !slices.Contains(built, arch) {
			built = append(built, arch)
		}
	}
	known := slices.Clone(versions.OperatorArches)
	slices.Sort(built)
	slices.Sort(known)
	if !slices.Equal(known, built) {
		t.Errorf("versions.OperatorArches is %v, the operator image is built for %v (OPERATOR_PLATFORMS)", known, built)
	}
}
