package bundle_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The bundle installs where the Prometheus Operator does not: OLM refuses a bundle with an object
// whose kind the cluster does not serve, so no manifest may be a monitoring.coreos.com object (the
// operator creates those itself where the API exists, internal/monitoring).
func TestBundleShipsNoMonitoringObjects(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(bundleDir, "manifests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("bundle manifests: %v, %v", files, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.HasPrefix(obj.APIVersion, "monitoring.coreos.com/") {
			t.Errorf("%s: a %s %s in the bundle fails the install on clusters without the Prometheus Operator", filepath.Base(f), obj.APIVersion, obj.Kind)
		}
	}
}
