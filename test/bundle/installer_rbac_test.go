package bundle_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// OLM v1 installs with the ServiceAccount of docs/olmv1/installer-rbac.yaml, and Kubernetes lets an
// account grant only what it holds: every rule the CSV grants the operator (clusterPermissions, and
// permissions, which an AllNamespaces install makes cluster-wide) must be covered by the installer's
// ClusterRole, or OLM v1's pre-authorization refuses the install or the upgrade. The OLM v1 e2e finds
// a missing rule too, but only after building and installing everything.
func TestOLMv1InstallerMayGrantEverythingTheCSVGrants(t *testing.T) {
	b := loadBundle(t)
	installer := installerRules(t, filepath.Join("..", "..", "docs", "olmv1", "installer-rbac.yaml"))
	spec := b.CSV.Spec.InstallStrategy.StrategySpec
	var granted []rbacv1.PolicyRule
	for _, p := range spec.ClusterPermissions {
		granted = append(granted, p.Rules...)
	}
	for _, p := range spec.Permissions {
		granted = append(granted, p.Rules...)
	}
	if len(granted) == 0 {
		t.Fatal("the CSV grants nothing: wrong bundle?")
	}
	for _, r := range granted {
		if len(r.NonResourceURLs) > 0 {
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if !covered(installer, g, res, v) {
						t.Errorf("the CSV grants %s %q/%s, which the OLM v1 installer's ClusterRole (docs/olmv1/installer-rbac.yaml) does not hold", v, g, res)
					}
				}
			}
		}
	}
}

// installerRules are the rules of the ClusterRole in the multi-document file path.
func installerRules(t *testing.T, path string) []rbacv1.PolicyRule {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(raw), "\n---") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if role.Kind == "ClusterRole" {
			rules = append(rules, role.Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no ClusterRole rules", path)
	}
	return rules
}

// covered says whether some rule without resourceNames allows verb on group/resource.
func covered(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	match := func(have []string, want string) bool {
		return slices.Contains(have, want) || slices.Contains(have, "*")
	}
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && match(r.APIGroups, group) && match(r.Resources, resource) && match(r.Verbs, verb) {
			return true
		}
	}
	return false
}
