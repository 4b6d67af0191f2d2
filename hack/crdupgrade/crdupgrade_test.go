// Package crdupgrade checks the CRD upgrade safety OLM v1 enforces between consecutive releases:
// before it upgrades a ClusterExtension, operator-controller's crdupgradesafety preflight compares the
// installed CRDs with the new bundle's and refuses, by default, any change that could break stored
// objects or clients (a version removed or no longer served, a field removed, a new required field, an
// enum narrowed, a validation added or tightened, a default changed, a scope changed...). That preflight
// is crdify run with a configuration of its own; its package is internal to operator-controller, so this
// test runs crdify itself, at the version operator-controller v1.5.1 pins (TestSameCrdifyAsOLM), with the
// preflight's configuration (preflightConfig). Its own module, so the main module does not take crdify.
package crdupgrade

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/crdify/pkg/config"
	"sigs.k8s.io/crdify/pkg/runner"
	"sigs.k8s.io/crdify/pkg/validations"
	"sigs.k8s.io/crdify/pkg/validations/property"
	"sigs.k8s.io/yaml"
)

const root = "../.."

// unsafeFrom names the releases whose upgrade to the next one OLM v1's check refuses, with where the
// docs tell users what to do about it. Such an upgrade must still be refused (else the entry and the
// docs' advice go); every other consecutive upgrade must pass.
var unsafeFrom = map[string]string{
	"0.1.0": "docs/install.md (OLM v1, CRD upgrade safety): the upgrade from 0.1.0 runs with crdUpgradeSafety enforcement None",
}

// preflightConfig is the configuration operator-controller v1.5.1's preflight gives crdify
// (internal/operator-controller/rukpak/preflights/crdupgradesafety, defaultConfig): conversion webhooks
// not considered, any unhandled change an error, descriptions free to change, enum values free to be added.
func preflightConfig() *config.Config {
	return &config.Config{
		Conversion:           config.ConversionPolicyIgnore,
		UnhandledEnforcement: config.EnforcementPolicyError,
		Validations: []config.ValidationConfig{
			{Name: "description", Enforcement: config.EnforcementPolicyNone},
			{Name: "enum", Enforcement: config.EnforcementPolicyError,
				Configuration: map[string]any{"additionPolicy": property.AdditionPolicyAllow}},
		},
	}
}

// release is a version and where its bundle's CRDs are: a commit, or "" for this tree's bundle/.
type release struct{ version, commit string }

// releases are the Makefile's RELEASES (VERSION=COMMIT, oldest first), then this tree's VERSION.
func releases(t *testing.T) []release {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []release
	for _, r := range strings.Fields(string(regexp.MustCompile(`(?m)^RELEASES \?= (.+)$`).FindSubmatch(mk)[1])) {
		v, c, _ := strings.Cut(r, "=")
		rs = append(rs, release{v, c})
	}
	return append(rs, release{string(regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(mk)[1]), ""})
}

func git(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

// crds are the CustomResourceDefinitions of a release's bundle/manifests, by name.
func crds(t *testing.T, r release) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	var files []string
	if r.commit == "" {
		m, err := filepath.Glob(filepath.Join(root, "bundle", "manifests", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files = m
	} else {
		files = strings.Fields(string(git(t, "ls-tree", "--name-only", r.commit, "bundle/manifests/")))
	}
	for _, f := range files {
		var b []byte
		if r.commit == "" {
			var err error
			if b, err = os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		} else {
			b = git(t, "show", r.commit+":"+f)
		}
		if !bytes.Contains(b, []byte("\nkind: CustomResourceDefinition\n")) {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			t.Fatalf("v%s %s: %v", r.version, f, err)
		}
		out[crd.Name] = crd
	}
	if len(out) == 0 {
		t.Fatalf("v%s: no CRDs in bundle/manifests", r.version)
	}
	return out
}

// refusals are what OLM v1's preflight would refuse in an upgrade from the older CRDs to the newer.
func refusals(t *testing.T, older, newer map[string]*apiextensionsv1.CustomResourceDefinition) []string {
	t.Helper()
	run, err := runner.New(preflightConfig(), runner.DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for name, old := range older {
		cur, ok := newer[name]
		if !ok {
			refused = append(refused, name+": removed (every object of it would be deleted)")
			continue
		}
		for _, e := range failures(run.Run(old, cur)) {
			refused = append(refused, name+": "+e)
		}
	}
	slices.Sort(refused)
	return refused
}

// failures are the errors of crdify's results, each with where it is (the preflight reports these).
func failures(res *runner.Results) []string {
	var out []string
	for _, r := range res.CRDValidation {
		for _, e := range r.Errors {
			out = append(out, r.Name+": "+e)
		}
	}
	for kind, byVersion := range map[string]map[string]map[string][]validations.ComparisonResult{
		"version": res.SameVersionValidation, "served versions": res.ServedVersionValidation} {
		for version, byProperty := range byVersion {
			for property, rs := range byProperty {
				for _, r := range rs {
					for _, e := range r.Errors {
						out = append(out, fmt.Sprintf("%s %s %s: %s: %s", kind, version, property, r.Name, e))
					}
				}
			}
		}
	}
	return out
}

// Each release's CRDs against the next one's, as OLM v1 compares them when a ClusterExtension upgrades.
func TestConsecutiveReleasesUpgradeSafely(t *testing.T) {
	rs := releases(t)
	// The check itself: this tree's CRDs against themselves pass (so a refusal below is the change's).
	cur := crds(t, rs[len(rs)-1])
	if refused := refusals(t, cur, cur); len(refused) > 0 {
		t.Fatalf("the CRDs against themselves are refused:\n%s", strings.Join(refused, "\n"))
	}
	for i := 1; i < len(rs); i++ {
		from, to := rs[i-1], rs[i]
		t.Run(from.version+"->"+to.version, func(t *testing.T) {
			refused := refusals(t, crds(t, from), crds(t, to))
			why, expected := unsafeFrom[from.version]
			switch {
			case expected && len(refused) == 0:
				t.Errorf("the upgrade from %s is safe now: drop it from unsafeFrom and the advice of %s", from.version, why)
			case expected:
				t.Logf("refused, as documented in %s: %d changes, e.g. %s", why, len(refused), refused[0])
			case len(refused) > 0:
				t.Errorf("OLM v1 would refuse the upgrade from %s to %s:\n%s", from.version, to.version, strings.Join(refused, "\n"))
			}
		})
	}
}

// The crdify this module builds against is the one operator-controller (hack/tools/operator-controller,
// the OLM v1 the e2e suites run) links: the rules checked here are the rules applied there.
func TestSameCrdifyAsOLM(t *testing.T) {
	version := func(gomod string) string {
		b, err := os.ReadFile(gomod)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/crdify (\S+)`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s requires no sigs.k8s.io/crdify", gomod)
		}
		return string(m[1])
	}
	ours, olm := version("go.mod"), version(filepath.Join(root, "hack", "tools", "operator-controller", "go.mod"))
	if ours != olm {
		t.Errorf("crdify %s here, %s in operator-controller's module: require %s", ours, olm, olm)
	}
}
