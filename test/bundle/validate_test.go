// Package bundle_test checks bundle/ — the OLM bundle `make bundle` renders — with operator-framework/api,
// the library behind `operator-sdk bundle validate`, so that a bad bundle fails `go test` in seconds rather
// than at the end of `make verify-bundle` or in an OLM e2e run.
package bundle_test

import (
	"path/filepath"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	valerrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

// bundleDir is the repository's rendered bundle.
var bundleDir = filepath.Join("..", "..", "bundle")

func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("load %s: %v", bundleDir, err)
	}
	if b.CSV == nil {
		t.Fatalf("%s has no ClusterServiceVersion", bundleDir)
	}
	return b
}

// Every validator the library has that applies to a bundle, the optional ones included: what
// `operator-sdk bundle validate --select-optional suite=operatorframework` and `name=operatorhub`,
// `name=community`, `name=good-practices` run, plus the object (PDB) checks. The multi-arch validator is
// left out: it inspects the images in a registry.
func TestBundlePassesEveryValidator(t *testing.T) {
	b := loadBundle(t)
	suites := map[string]interfaces.Validator{
		"csv":             validation.ClusterServiceVersionValidator,
		"crd":             validation.CustomResourceDefinitionValidator,
		"bundle":          validation.BundleValidator,
		"operatorhub":     validation.OperatorHubV2Validator,
		"categories":      validation.StandardCategoriesValidator,
		"capabilities":    validation.StandardCapabilitiesValidator,
		"objects":         validation.ObjectValidator,
		"community":       validation.CommunityOperatorValidator,
		"deprecated-apis": validation.AlphaDeprecatedAPIsValidator,
		"good-practices":  validation.GoodPracticesValidator,
	}
	// k8s-version: the removed-APIs check errs (instead of warning) on APIs removed by this Kubernetes
	// release; the newest one we test on. index-path: where the community check reads the bundle image's
	// labels (com.redhat.openshift.versions).
	optional := map[string]string{
		"k8s-version": "1.34",
		"index-path":  filepath.Join("..", "..", "bundle.Dockerfile"),
	}
	for name, v := range suites {
		t.Run(name, func(t *testing.T) {
			objs := append([]interface{}{b, optional}, b.ObjectsToValidate()...)
			for _, r := range v.Validate(objs...) {
				for _, e := range r.Errors {
					t.Errorf("%s: %v", r.Name, e)
				}
				// A warning is a finding a reviewer of community-operators would raise: it fails too.
				for _, w := range r.Warnings {
					if w.Level == valerrors.LevelWarn {
						t.Errorf("%s: %v", r.Name, w)
					}
				}
			}
		})
	}
}
