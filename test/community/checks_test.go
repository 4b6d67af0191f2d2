// Package community_test holds community/ — the tree the community catalog repositories expect, made by
// hack/community.sh — to the static checks their pipeline runs that need no network, so a submission
// that would fail there fails `go test` here first. The checks read a tree (inspect), so they can be shown
// failing on broken copies of it as well as passing on the committed one.
package community_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const pkg = "etcd-autopilot"

// The values the community pipeline accepts (operator-pipelines, static_tests/community/validations.py;
// community-operators-prod config.yaml for the registries).
var (
	capabilities = []string{"Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot"}
	categories   = []string{"AI/Machine Learning", "Application Runtime", "Big Data", "Cloud Provider", "Developer Tools",
		"Database", "Drivers and plugins", "Integration & Delivery", "Logging & Tracing", "Modernization & Migration",
		"Monitoring", "Networking", "OpenShift Optional", "Security", "Storage", "Streaming & Messaging"}
	iconTypes          = []string{"image/png", "image/jpeg", "image/gif", "image/svg+xml"}
	bundleRegistries   = []string{"quay.io/community-operator-pipeline-prod/", "quay.io/openshift-community-operators/"}
	templateTypes      = []string{"olm.template.basic", "olm.semver"} // ci.yaml type = the template's schema
	promotions         = []string{"never", "always", "review-needed"}
	updateGraphs       = []string{"replaces-mode", "semver-mode"}
	githubHandle       = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)
	containerImage     = regexp.MustCompile(`^([^/]+/)+[^/:]+:.+`)
	httpURL            = regexp.MustCompile(`^https?://.+`)
	catalogName        = regexp.MustCompile(`^(latest|v4\.\d+)$`)
	openShiftSelector  = regexp.MustCompile(`^(=)?v?(4\.\d+)(?:-v?(4\.\d+))?$`)
	channelNamePattern = regexp.MustCompile(`^(candidate|fast|stable|eus)(-v\d+(\.\d+)?)?$`)
)

// openShiftKube is the Kubernetes minor each OpenShift minor ships (Red Hat's published table); a
// catalog for an OpenShift release not listed here is a finding, so a new one is added on purpose.
var openShiftKube = map[string]string{
	"4.12": "1.25", "4.13": "1.26", "4.14": "1.27", "4.15": "1.28", "4.16": "1.29",
	"4.17": "1.30", "4.18": "1.31", "4.19": "1.32", "4.20": "1.33", "4.21": "1.34",
}

type csvDoc struct {
	Metadata struct {
		Name        string
		Annotations map[string]string
	}
	Spec struct {
		DisplayName, Description, Version, Replaces, MinKubeVersion string
		Maintainers                                                 []struct{ Name, Email string }
		Provider                                                    struct{ Name string }
		Links                                                       []struct{ Name, URL string }
		Icon                                                        []struct{ Base64data, Mediatype string }
		Keywords                                                    []string
	}
}

// bundleDir is one operators/<pkg>/<version>/ directory as read.
type bundleDir struct {
	dir         string
	csv         csvDoc
	annotations map[string]string
}

// catalogBlob is one document of a rendered file-based catalog.
type catalogBlob struct {
	Schema, Name, Package, Image, DefaultChannel string
	Entries                                      []struct {
		Name, Replaces, SkipRange string
		Skips                     []string
	}
	Properties []struct {
		Type  string
		Value json.RawMessage
	}
}

type ciConfig struct {
	Reviewers   any    `json:"reviewers"`
	UpdateGraph string `json:"updateGraph"`
	FBC         *struct {
		Enabled                  bool   `json:"enabled"`
		VersionPromotionStrategy string `json:"version_promotion_strategy"`
		CatalogMapping           []struct {
			TemplateName string   `json:"template_name"`
			CatalogNames []string `json:"catalog_names"`
			Type         string   `json:"type"`
		} `json:"catalog_mapping"`
	} `json:"fbc"`
}

// findings collects what a check found, each prefixed with where.
type findings []string

func (f *findings) add(where, format string, args ...any) {
	*f = append(*f, where+": "+fmt.Sprintf(format, args...))
}

// inspect runs the offline community checks on a community tree (the directory holding operators/ and
// catalogs/) and returns what fails them.
func inspect(root string) findings {
	var f findings
	op := filepath.Join(root, "operators", pkg)
	ci := checkCIConfig(&f, op)
	bundles := map[string]*bundleDir{} // by CSV name
	entries, err := os.ReadDir(op)
	if err != nil {
		f.add(op, "%v", err)
		return f
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "catalog-templates" {
			continue
		}
		if b := checkBundle(&f, filepath.Join(op, e.Name())); b != nil {
			bundles[b.csv.Metadata.Name] = b
		}
	}
	if len(bundles) == 0 {
		f.add(op, "no bundle directory (<version>/manifests, <version>/metadata)")
	}
	for _, b := range bundles {
		// check_replaces_exists: a bundle may only replace one this operator has.
		if r := b.csv.Spec.Replaces; r != "" && bundles[r] == nil {
			f.add(b.dir, "the CSV replaces %s, which is not a bundle of %s here (the first bundle replaces nothing: use olm.skipRange)", r, pkg)
		}
		checkOpenShiftVersions(&f, b, ci)
	}
	checkCatalogs(&f, root, ci, bundles)
	return f
}

// checkCIConfig: ci.yaml is there, names its reviewers (present, GitHub handles), enables FBC and maps
// existing templates of a known type to OpenShift catalogs.
func checkCIConfig(f *findings, op string) ciConfig {
	where := filepath.Join(op, "ci.yaml")
	var ci ciConfig
	raw, err := os.ReadFile(where)
	if err != nil {
		f.add(where, "%v", err)
		return ci
	}
	if err := yaml.UnmarshalStrict(raw, &ci); err != nil {
		f.add(where, "%v", err)
		return ci
	}
	switch r := ci.Reviewers.(type) {
	case nil:
		f.add(where, "reviewers is missing (a list of GitHub handles, empty until the maintainers name theirs)")
	case []any:
		for _, h := range r {
			if s, ok := h.(string); !ok || !githubHandle.MatchString(s) {
				f.add(where, "reviewers: %v is not a GitHub handle", h)
			}
		}
	default:
		f.add(where, "reviewers is %T, want a list of GitHub handles", r)
	}
	if ci.UpdateGraph != "" && !slices.Contains(updateGraphs, ci.UpdateGraph) {
		f.add(where, "updateGraph %q is not one of %v", ci.UpdateGraph, updateGraphs)
	}
	if ci.FBC == nil || !ci.FBC.Enabled {
		f.add(where, "fbc.enabled is not true: the catalogs are file-based, rendered from catalog-templates")
		return ci
	}
	if s := ci.FBC.VersionPromotionStrategy; s != "" && !slices.Contains(promotions, s) {
		f.add(where, "fbc.version_promotion_strategy %q is not one of %v", s, promotions)
	}
	if len(ci.FBC.CatalogMapping) == 0 {
		f.add(where, "fbc.catalog_mapping is empty")
	}
	for _, m := range ci.FBC.CatalogMapping {
		tpl := filepath.Join(op, "catalog-templates", m.TemplateName)
		var head struct{ Schema string }
		if raw, err := os.ReadFile(tpl); err != nil {
			f.add(where, "fbc.catalog_mapping template_name %q: %v", m.TemplateName, err)
		} else if err := yaml.Unmarshal(raw, &head); err != nil {
			f.add(tpl, "%v", err)
		} else if !slices.Contains(templateTypes, m.Type) || head.Schema != m.Type {
			f.add(where, "fbc.catalog_mapping type %q for %s, whose schema is %q", m.Type, m.TemplateName, head.Schema)
		}
		if len(m.CatalogNames) == 0 {
			f.add(where, "fbc.catalog_mapping %s maps to no catalog", m.TemplateName)
		}
		for _, n := range m.CatalogNames {
			if !catalogName.MatchString(n) {
				f.add(where, "catalog name %q is neither latest nor v4.N", n)
			}
		}
	}
	return ci
}

// checkBundle reads one version directory and applies check_required_fields (warnings and errors
// alike), check_operator_name, check_operator_version_directory_name and the api library's CSV, bundle
// and OperatorHub validators (`operator-sdk bundle validate` in the pipeline).
func checkBundle(f *findings, dir string) *bundleDir {
	b := &bundleDir{dir: dir}
	csvs, _ := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	if len(csvs) != 1 {
		f.add(dir, "want one manifests/*.clusterserviceversion.yaml, found %d", len(csvs))
		return nil
	}
	raw, err := os.ReadFile(csvs[0])
	if err == nil {
		err = yaml.Unmarshal(raw, &b.csv)
	}
	if err != nil {
		f.add(csvs[0], "%v", err)
		return nil
	}
	var ann struct{ Annotations map[string]string }
	raw, err = os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err == nil {
		err = yaml.Unmarshal(raw, &ann)
	}
	if err != nil {
		f.add(dir, "metadata/annotations.yaml: %v", err)
		return nil
	}
	b.annotations = ann.Annotations
	checkRequiredFields(f, csvs[0], b.csv)

	spec := b.csv.Spec
	if filepath.Base(dir) != spec.Version {
		f.add(dir, "the directory is not named after the CSV's version %s", spec.Version)
	}
	if p := b.annotations["operators.operatorframework.io.bundle.package.v1"]; p != pkg {
		f.add(dir, "metadata/annotations.yaml names package %q, the directory %q", p, pkg)
	}
	if want := pkg + ".v" + spec.Version; b.csv.Metadata.Name != want {
		f.add(csvs[0], "the CSV is named %s, want %s", b.csv.Metadata.Name, want)
	}
	if r := b.csv.Metadata.Annotations["olm.skipRange"]; r != "" {
		if _, err := semver.ParseRange(r); err != nil {
			f.add(csvs[0], "olm.skipRange %q: %v", r, err)
		}
	}

	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		f.add(dir, "load the bundle: %v", err)
		return b
	}
	for _, v := range []interfaces.Validator{validation.ClusterServiceVersionValidator, validation.BundleValidator, validation.OperatorHubV2Validator} {
		for _, r := range v.Validate(append([]any{bundle}, bundle.ObjectsToValidate()...)...) {
			for _, e := range r.Errors {
				f.add(dir, "%s: %v", r.Name, e)
			}
		}
	}
	return b
}

// checkRequiredFields: the community's check_required_fields, its warnings taken as failures, with
// displayName held to the 3–50 characters it documents (its pattern only enforces the 3).
func checkRequiredFields(f *findings, where string, csv csvDoc) {
	a, s := csv.Metadata.Annotations, csv.Spec
	if !slices.Contains(capabilities, a["capabilities"]) {
		f.add(where, "capabilities %q is not one of %v", a["capabilities"], capabilities)
	}
	for _, c := range strings.Split(a["categories"], ",") {
		if !slices.Contains(categories, strings.TrimSpace(c)) {
			f.add(where, "categories: %q is not an allowed category", strings.TrimSpace(c))
		}
	}
	if !containerImage.MatchString(a["containerImage"]) {
		f.add(where, "containerImage %q is not a registry/repository:tag reference", a["containerImage"])
	}
	if _, err := time.Parse(time.RFC3339, a["createdAt"]); err != nil {
		f.add(where, "createdAt %q: %v", a["createdAt"], err)
	}
	if !httpURL.MatchString(a["repository"]) {
		f.add(where, "repository %q is not an http(s) URL", a["repository"])
	}
	if len([]rune(a["support"])) < 3 {
		f.add(where, "support %q: want at least 3 characters", a["support"])
	}
	if len([]rune(a["description"])) < 10 {
		f.add(where, "the description annotation %q: want at least 10 characters", a["description"])
	}
	if n := len([]rune(s.DisplayName)); n < 3 || n > 50 {
		f.add(where, "displayName %q: want 3 to 50 characters, has %d", s.DisplayName, n)
	}
	if len([]rune(s.Description)) < 20 {
		f.add(where, "spec.description: want at least 20 characters")
	}
	if len(s.Icon) == 0 {
		f.add(where, "icon: none")
	}
	for _, i := range s.Icon {
		if _, err := base64.StdEncoding.DecodeString(i.Base64data); err != nil || len(i.Base64data) < 4 {
			f.add(where, "icon: base64data is not base64 (%v)", err)
		}
		if !slices.Contains(iconTypes, i.Mediatype) {
			f.add(where, "icon: mediatype %q is not one of %v", i.Mediatype, iconTypes)
		}
	}
	if _, err := semver.Parse(s.Version); err != nil {
		f.add(where, "version %q: %v", s.Version, err)
	}
	if len(s.Maintainers) == 0 {
		f.add(where, "maintainers: none")
	}
	for _, m := range s.Maintainers {
		if addr, err := mail.ParseAddress(m.Email); m.Name == "" || err != nil || addr.Address != m.Email {
			f.add(where, "maintainer %q <%s>: want a name and a plain email address", m.Name, m.Email)
		}
	}
	if len([]rune(s.Provider.Name)) < 3 {
		f.add(where, "provider.name %q: want at least 3 characters", s.Provider.Name)
	}
	if len(s.Links) == 0 {
		f.add(where, "links: none")
	}
	for _, l := range s.Links {
		if u, err := url.Parse(l.URL); l.Name == "" || err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			f.add(where, "link %q %q: want a name and an http(s) URL", l.Name, l.URL)
		}
	}
	if len(s.Keywords) == 0 || slices.Contains(s.Keywords, "") {
		f.add(where, "keywords: want a list of non-empty words")
	}
}

// checkOpenShiftVersions: check_api_version_constraints — every OpenShift release the bundle's
// com.redhat.openshift.versions admits ships at least its minKubeVersion — and every catalog ci.yaml
// maps it to is one of those releases.
func checkOpenShiftVersions(f *findings, b *bundleDir, ci ciConfig) {
	sel := strings.TrimSpace(b.annotations["com.redhat.openshift.versions"])
	if sel == "" {
		f.add(b.dir, "metadata/annotations.yaml: com.redhat.openshift.versions is not set (minKubeVersion %q)", b.csv.Spec.MinKubeVersion)
		return
	}
	m := openShiftSelector.FindStringSubmatch(sel)
	if m == nil {
		f.add(b.dir, "com.redhat.openshift.versions %q: want vA.B, =vA.B or vA.B-vC.D", sel)
		return
	}
	from, to := minor(m[2]), minor(m[2])
	if m[1] == "" {
		to = 1 << 30
	}
	if m[3] != "" {
		to = minor(m[3])
	}
	admitted := map[string]bool{}
	for ocp := range openShiftKube {
		if v := minor(ocp); v >= from && v <= to {
			admitted["v"+ocp] = true
		}
	}
	if mk := b.csv.Spec.MinKubeVersion; mk != "" {
		min, err := semver.ParseTolerant(mk)
		if err != nil {
			f.add(b.dir, "minKubeVersion %q: %v", mk, err)
		}
		for ocp := range admitted {
			kube := semver.MustParse(openShiftKube[strings.TrimPrefix(ocp, "v")] + ".0")
			if err == nil && kube.LT(semver.Version{Major: min.Major, Minor: min.Minor}) {
				f.add(b.dir, "OpenShift %s (Kubernetes %d.%d) is admitted by com.redhat.openshift.versions %q but is below minKubeVersion %s",
					ocp, kube.Major, kube.Minor, sel, mk)
			}
		}
	}
	if ci.FBC == nil {
		return
	}
	for _, mp := range ci.FBC.CatalogMapping {
		for _, n := range mp.CatalogNames {
			if n == "latest" {
				continue
			}
			if _, known := openShiftKube[strings.TrimPrefix(n, "v")]; !known {
				f.add(b.dir, "catalog %s: an OpenShift release this check does not know the Kubernetes version of", n)
			} else if !admitted[n] {
				f.add(b.dir, "catalog %s is not admitted by com.redhat.openshift.versions %q", n, sel)
			}
		}
	}
}

// minor: 4.17 -> 417, so that OpenShift minors order as numbers.
func minor(v string) int {
	var maj, mi int
	_, _ = fmt.Sscanf(v, "%d.%d", &maj, &mi)
	return maj*100 + mi
}

// checkCatalogs: the rendered catalogs are exactly the ones ci.yaml maps, each one package (this one)
// whose channels have allowed names and only bundles it holds, whose replaces stay in the channel and
// never loop, whose bundles are this tree's, each in a channel, pulled from the community pipeline's
// registries, with olm.csv.metadata and without olm.bundle.object (check_olm_bundle_object_in_fbc,
// check_bundle_images_in_fbc, check_dangling_bundles, check_upgrade_graph_loop).
func checkCatalogs(f *findings, root string, ci ciConfig, bundles map[string]*bundleDir) {
	want := map[string]bool{}
	if ci.FBC != nil {
		for _, m := range ci.FBC.CatalogMapping {
			for _, n := range m.CatalogNames {
				want[n] = true
			}
		}
	}
	dirs, _ := os.ReadDir(filepath.Join(root, "catalogs"))
	for _, d := range dirs {
		if !want[d.Name()] {
			f.add(filepath.Join(root, "catalogs", d.Name()), "a catalog ci.yaml does not map")
		}
	}
	// The channels a bundle declares: the catalog's channels must be among them.
	declared := map[string]bool{}
	for _, b := range bundles {
		for _, c := range strings.Split(b.annotations["operators.operatorframework.io.bundle.channels.v1"], ",") {
			declared[strings.TrimSpace(c)] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		checkCatalog(f, filepath.Join(root, "catalogs", n, pkg, "catalog.yaml"), bundles, declared)
	}
}

func checkCatalog(f *findings, path string, bundles map[string]*bundleDir, declared map[string]bool) {
	blobs, err := readCatalog(path)
	if err != nil {
		f.add(path, "%v", err)
		return
	}
	var pkgs []catalogBlob
	var channels []catalogBlob
	inCatalog := map[string]catalogBlob{}
	for _, b := range blobs {
		switch b.Schema {
		case "olm.package":
			pkgs = append(pkgs, b)
		case "olm.channel":
			channels = append(channels, b)
		case "olm.bundle":
			inCatalog[b.Name] = b
		case "olm.deprecations":
		default:
			f.add(path, "unexpected schema %q", b.Schema)
		}
	}
	if len(pkgs) != 1 || pkgs[0].Name != pkg {
		f.add(path, "want one olm.package named %s, found %d (%v)", pkg, len(pkgs), pkgs)
	}
	inChannel := map[string]bool{}
	channelNames := map[string]bool{}
	for _, c := range channels {
		channelNames[c.Name] = true
		if c.Package != pkg {
			f.add(path, "channel %s belongs to package %q", c.Name, c.Package)
		}
		if !channelNamePattern.MatchString(c.Name) || !declared[c.Name] {
			f.add(path, "channel %q: not an allowed channel name (candidate, fast, stable, eus, optionally -vN[.N]) the bundles declare (%v)", c.Name, slices.Sorted(maps.Keys(declared)))
		}
		replaces := map[string]string{}
		for _, e := range c.Entries {
			if inChannel[c.Name+"/"+e.Name] {
				f.add(path, "channel %s lists %s twice", c.Name, e.Name)
			}
			inChannel[c.Name+"/"+e.Name] = true
			inChannel[e.Name] = true
			if _, ok := inCatalog[e.Name]; !ok {
				f.add(path, "channel %s: %s has no olm.bundle in the catalog", c.Name, e.Name)
			}
			if e.SkipRange != "" {
				if _, err := semver.ParseRange(e.SkipRange); err != nil {
					f.add(path, "channel %s: %s skipRange %q: %v", c.Name, e.Name, e.SkipRange, err)
				}
			}
			if e.Replaces != "" {
				replaces[e.Name] = e.Replaces
			}
		}
		for from, to := range replaces {
			if !inChannel[c.Name+"/"+to] {
				f.add(path, "channel %s: %s replaces %s, which the channel does not have", c.Name, from, to)
			}
			seen := map[string]bool{from: true}
			for next, ok := replaces[to]; ok; next, ok = replaces[next] {
				if seen[next] {
					f.add(path, "channel %s: the replaces chain from %s loops", c.Name, from)
					break
				}
				seen[next] = true
			}
		}
	}
	if len(pkgs) == 1 && !channelNames[pkgs[0].DefaultChannel] {
		f.add(path, "default channel %q is not a channel", pkgs[0].DefaultChannel)
	}
	for name, b := range inCatalog {
		checkCatalogBundle(f, path, b, bundles[name])
		if !inChannel[name] {
			f.add(path, "bundle %s is in no channel", name)
		}
	}
	for name := range bundles {
		if _, ok := inCatalog[name]; !ok {
			f.add(path, "the tree's bundle %s is not in the catalog", name)
		}
	}
}

func checkCatalogBundle(f *findings, path string, b catalogBlob, dir *bundleDir) {
	if b.Package != pkg {
		f.add(path, "bundle %s belongs to package %q", b.Name, b.Package)
	}
	if dir == nil {
		f.add(path, "bundle %s is not a bundle directory of the tree", b.Name)
	}
	if !slices.ContainsFunc(bundleRegistries, func(r string) bool { return strings.HasPrefix(b.Image, r) }) {
		f.add(path, "bundle %s image %q is not in an allowed registry %v", b.Name, b.Image, bundleRegistries)
	}
	var pkgProps []struct{ PackageName, Version string }
	csvMetadata := false
	for _, p := range b.Properties {
		switch p.Type {
		case "olm.bundle.object":
			f.add(path, "bundle %s has an olm.bundle.object property (render with --migrate-level bundle-object-to-csv-metadata)", b.Name)
		case "olm.csv.metadata":
			csvMetadata = true
		case "olm.package":
			var v struct{ PackageName, Version string }
			if err := json.Unmarshal(p.Value, &v); err != nil {
				f.add(path, "bundle %s olm.package: %v", b.Name, err)
			}
			pkgProps = append(pkgProps, v)
		}
	}
	if !csvMetadata {
		f.add(path, "bundle %s has no olm.csv.metadata (the console reads it)", b.Name)
	}
	if len(pkgProps) != 1 || pkgProps[0].PackageName != pkg || (dir != nil && pkgProps[0].Version != dir.csv.Spec.Version) {
		f.add(path, "bundle %s: olm.package properties %v, want one of package %s at its directory's version", b.Name, pkgProps, pkg)
	}
	if tag := strings.SplitN(b.Image, "@", 2)[0]; dir != nil && !strings.HasSuffix(tag, ":"+dir.csv.Spec.Version) {
		f.add(path, "bundle %s image %q is not tagged %s", b.Name, b.Image, dir.csv.Spec.Version)
	}
}

func readCatalog(path string) ([]catalogBlob, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	var blobs []catalogBlob
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var b catalogBlob
		err := dec.Decode(&b)
		if errors.Is(err, io.EOF) {
			return blobs, nil
		}
		if err != nil {
			return nil, err
		}
		blobs = append(blobs, b)
	}
}
