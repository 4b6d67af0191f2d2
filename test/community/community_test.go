package community_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tree is the committed community submission.
var tree = filepath.Join("..", "..", "community")

func TestCommittedTreePassesTheCommunityChecks(t *testing.T) {
	for _, finding := range inspect(tree) {
		t.Error(finding)
	}
}

// The committed tree is what hack/community.sh makes from bundle/ and the template (it renders the
// catalogs again with opm and compares), so it cannot drift from the bundle it claims to submit.
func TestCommittedTreeIsWhatTheGeneratorMakes(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	opm := filepath.Join(root, "bin", "opm")
	if _, err := os.Stat(opm); err != nil {
		t.Fatalf("%v: build it with `make opm` (make test-unit does)", err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "community.sh"), "--check")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OPM="+opm)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/community.sh --check: %v\n%s", err, out)
	}
}

// Each row breaks a copy of the committed tree the way a submission could be broken, and the checks
// must say so: they can fail, and they fail for the right reason.
func TestChecksCatchBrokenTrees(t *testing.T) {
	const (
		op      = "operators/etcd-autopilot/"
		bundle  = op + "0.2.0/"
		csv     = bundle + "manifests/etcd-autopilot.clusterserviceversion.yaml"
		ann     = bundle + "metadata/annotations.yaml"
		ci      = op + "ci.yaml"
		catalog = "catalogs/v4.17/etcd-autopilot/catalog.yaml"
	)
	type edit struct{ file, old, new string }
	cases := []struct {
		name  string
		edits []edit
		want  string
	}{
		{"displayName too long", []edit{{csv, "  displayName: etcd Autopilot\n", "  displayName: " + strings.Repeat("etcd ", 11) + "\n"}}, "displayName"},
		{"short description", []edit{{csv, "  description: |\n", "  description: short\n  x-old-description: |\n"}}, "spec.description"},
		{"maintainer without a valid email", []edit{{csv, "  - email: maintainers@etcd-autopilot.dev\n", "  - email: maintainers at etcd-autopilot\n"}}, "maintainer"},
		{"category not in the list", []edit{{csv, "    categories: Database\n", "    categories: Database, Key-Value Stores\n"}}, "categories"},
		{"unknown capability level", []edit{{csv, "    capabilities: Auto Pilot\n", "    capabilities: Autopilot\n"}}, "capabilities"},
		{"no containerImage", []edit{{csv, "    containerImage: ", "    x-containerImage: "}}, "containerImage"},
		{"icon of an unsupported type", []edit{{csv, "    mediatype: image/svg+xml\n", "    mediatype: image/webp\n"}}, "icon"},
		{"no provider", []edit{{csv, "  provider:\n    name: etcd-autopilot\n", "  provider:\n    name: ea\n"}}, "provider.name"},
		{"replaces a release the tree lacks", []edit{{csv, "  version: 0.2.0\n", "  replaces: etcd-autopilot.v0.1.0\n  version: 0.2.0\n"}}, "replaces etcd-autopilot.v0.1.0"},
		{"minKubeVersion above the oldest OpenShift admitted", []edit{{csv, "  minKubeVersion: 1.30.0\n", "  minKubeVersion: 1.31.0\n"}}, "below minKubeVersion"},
		{"no com.redhat.openshift.versions", []edit{{ann, "  com.redhat.openshift.versions: v4.17\n", ""}}, "com.redhat.openshift.versions is not set"},
		{"a catalog for an OpenShift release the bundle excludes", []edit{{ann, "  com.redhat.openshift.versions: v4.17\n", "  com.redhat.openshift.versions: v4.18\n"}}, "catalog v4.17 is not admitted"},
		{"directory not named after the version", []edit{{csv, "  version: 0.2.0\n", "  version: 0.2.1\n"}}, "not named after"},
		{"package annotation differs", []edit{{ann, "bundle.package.v1: etcd-autopilot\n", "bundle.package.v1: etcd-operator\n"}}, "names package"},
		{"olm.bundle.object in a catalog", []edit{{catalog, "- type: olm.csv.metadata\n", "- type: olm.bundle.object\n  value:\n    data: e30=\n- type: olm.csv.metadata\n"}}, "olm.bundle.object"},
		{"a channel name the bundle does not declare", []edit{{catalog, "name: fast\n", "name: beta\n"}}, `channel "beta"`},
		// (edits of the first channel's entries, which start with v0.2.0, the first community release, in
		// every later release too)
		{"a channel entry without its bundle", []edit{{catalog, "entries:\n",
			"entries:\n- name: etcd-autopilot.v9.9.9\n  replaces: etcd-autopilot.v0.2.0\n"}}, "v9.9.9 has no olm.bundle"},
		{"a channel entry replacing what the channel lacks", []edit{{catalog, "entries:\n- name: etcd-autopilot.v0.2.0\n",
			"entries:\n- name: etcd-autopilot.v0.2.0\n  replaces: etcd-autopilot.v0.1.0\n"}}, "which the channel does not have"},
		{"the catalog's bundle in another package", []edit{{catalog, "name: etcd-autopilot.v0.2.0\npackage: etcd-autopilot\n", "name: etcd-autopilot.v0.2.0\npackage: etcd\n"}}, `belongs to package "etcd"`},
		{"a bundle image outside the pipeline's registries", []edit{{catalog, "image: quay.io/community-operator-pipeline-prod/etcd-autopilot:0.2.0\n", "image: ghcr.io/etcd-autopilot/etcd-autopilot-bundle:v0.2.0\n"}}, "allowed registry"},
		{"a default channel that is not a channel", []edit{{catalog, "defaultChannel: stable\n", "defaultChannel: preview\n"}}, "default channel"},
		{"no reviewers key", []edit{{ci, "reviewers: []\n", ""}}, "reviewers is missing"},
		{"a reviewer that is not a GitHub handle", []edit{{ci, "reviewers: []\n", "reviewers: [\"etcd autopilot maintainers\"]\n"}}, "not a GitHub handle"},
		{"FBC not enabled", []edit{{ci, "  enabled: true\n", "  enabled: false\n"}}, "fbc.enabled"},
		{"a template of the wrong type", []edit{{ci, "    type: olm.template.basic\n", "    type: olm.semver\n"}}, "fbc.catalog_mapping type"},
		{"a mapped catalog that was not rendered", []edit{{ci, `"v4.20"]`, `"v4.20", "v4.21"]`}}, "v4.21"},
		{"an invalid updateGraph", []edit{{ci, "reviewers: []\n", "reviewers: []\nupdateGraph: replaces\n"}}, "updateGraph"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if err := os.CopyFS(root, os.DirFS(tree)); err != nil {
				t.Fatal(err)
			}
			for _, e := range c.edits {
				p := filepath.Join(root, e.file)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(b), e.old) {
					t.Fatalf("%s does not contain %q: the mutation no longer applies", e.file, e.old)
				}
				if err := os.WriteFile(p, []byte(strings.Replace(string(b), e.old, e.new, 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := inspect(root)
			for _, finding := range got {
				if strings.Contains(finding, c.want) {
					return
				}
			}
			t.Errorf("no finding mentions %q; findings:\n%s", c.want, strings.Join(got, "\n"))
		})
	}
}
