package plugin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2)
// that krew-index validation checks; unknown fields fail the strict decode.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// The krew manifest installs the binary make plugin builds, at the Makefile's release version.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "hack", "krew", "etcd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("hack/krew/etcd.yaml: %v", err)
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("no VERSION in the Makefile")
	}
	version := "v" + string(m[1])

	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion/kind %s/%s", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != "etcd" {
		t.Errorf("name %q: kubectl finds kubectl-etcd as `kubectl etcd`", p.Metadata.Name)
	}
	if p.Spec.Version != version {
		t.Errorf("version %s, want the Makefile's %s", p.Spec.Version, version)
	}
	if p.Spec.ShortDescription == "" || len(p.Spec.ShortDescription) > 50 || p.Spec.Description == "" || p.Spec.Homepage == "" {
		t.Error("shortDescription (at most 50 characters), description and homepage are required")
	}
	if len(p.Spec.Platforms) == 0 {
		t.Fatal("no platforms")
	}
	seen := map[string]bool{}
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		key := os + "/" + arch
		if os == "" || arch == "" || seen[key] {
			t.Errorf("platform %q: each needs its own os and arch", key)
		}
		seen[key] = true
		want := "/releases/download/" + version + "/kubectl-etcd_" + version + "_" + os + "_" + arch + ".tar.gz"
		if !strings.HasPrefix(pl.URI, "https://") || !strings.HasSuffix(pl.URI, want) {
			t.Errorf("%s: uri %s, want https://…%s", key, pl.URI, want)
		}
		if !hex.MatchString(pl.SHA256) {
			t.Errorf("%s: sha256 %q is not 64 lowercase hex digits", key, pl.SHA256)
		}
		if pl.Bin != "kubectl-etcd" || len(pl.Files) != 1 || pl.Files[0].From != "kubectl-etcd" {
			t.Errorf("%s: installs %v as %s, want the kubectl-etcd binary", key, pl.Files, pl.Bin)
		}
	}
}
