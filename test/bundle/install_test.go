package bundle_test

import (
	"os"
	"os/exec"
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

// basicTemplate is the part of an opm basic catalog template the checks below read.
type basicTemplate struct {
	Entries []struct {
		Schema, Name, Image string
		Entries             []struct{ Name, Replaces, SkipRange string }
	}
}

func readTemplate(t *testing.T, path string) basicTemplate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tpl basicTemplate
	if err := yaml.Unmarshal(raw, &tpl); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tpl
}

// The community catalogs hold only what was published there: every replaces in their template names
// an entry of the same channel, the CSV's replaces (if any) is one of those entries, and this
// release is in every channel with its bundle image listed. The committed rendered catalogs match
// the template and bundle/ (hack/community-catalog.sh --check).
func TestCommunitySubmission(t *testing.T) {
	root := filepath.Join("..", "..")
	tpl := readTemplate(t, filepath.Join(root, "community", "etcd-autopilot", "catalog-templates", "basic.yaml"))
	csvRaw, err := os.ReadFile(filepath.Join(bundleDir, "manifests", "etcd-autopilot.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var csv struct {
		Metadata struct{ Name string }
		Spec     struct{ Replaces, Version string }
	}
	if err := yaml.Unmarshal(csvRaw, &csv); err != nil {
		t.Fatal(err)
	}
	published := map[string]bool{}
	channels, images := 0, map[string]bool{}
	for _, e := range tpl.Entries {
		switch e.Schema {
		case "olm.channel":
			channels++
			names := map[string]bool{}
			for _, b := range e.Entries {
				names[b.Name] = true
				published[b.Name] = true
			}
			for _, b := range e.Entries {
				if b.Replaces != "" && !names[b.Replaces] {
					t.Errorf("channel %s: %s replaces %s, which the community catalog does not have", e.Name, b.Name, b.Replaces)
				}
			}
			if !names[csv.Metadata.Name] {
				t.Errorf("channel %s lacks this release, %s", e.Name, csv.Metadata.Name)
			}
		case "olm.bundle":
			images[e.Image] = true
		}
	}
	if channels == 0 {
		t.Fatal("the community template has no channels")
	}
	if csv.Spec.Replaces != "" && !published[csv.Spec.Replaces] {
		t.Errorf("the CSV replaces %s, which is not in the community catalog", csv.Spec.Replaces)
	}
	found := false
	for img := range images {
		found = found || strings.HasSuffix(img, ":"+csv.Spec.Version)
	}
	if !found {
		t.Errorf("the community template lists no bundle image for %s: %v", csv.Spec.Version, images)
	}

	ci, err := os.ReadFile(filepath.Join(root, "community", "etcd-autopilot", "ci.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		UpdateGraph string `json:"updateGraph"`
		FBC         struct {
			Enabled        bool
			CatalogMapping []struct {
				TemplateName string   `json:"template_name"`
				CatalogNames []string `json:"catalog_names"`
				Type         string
			} `json:"catalog_mapping"`
		}
	}
	if err := yaml.Unmarshal(ci, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.UpdateGraph != "replaces-mode" && cfg.UpdateGraph != "semver-mode" && cfg.UpdateGraph != "semver-skippatch-mode" {
		t.Errorf("ci.yaml updateGraph %q", cfg.UpdateGraph)
	}
	if !cfg.FBC.Enabled || len(cfg.FBC.CatalogMapping) != 1 || cfg.FBC.CatalogMapping[0].TemplateName != "basic.yaml" ||
		cfg.FBC.CatalogMapping[0].Type != "olm.template.basic" || len(cfg.FBC.CatalogMapping[0].CatalogNames) == 0 {
		t.Errorf("ci.yaml fbc %+v: want the basic template mapped to the OpenShift catalogs", cfg.FBC)
	}

	check := exec.Command(filepath.Join("hack", "community-catalog.sh"), "--check")
	check.Dir = root
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("rendered community catalogs: %v\n%s", err, out)
	}
}
