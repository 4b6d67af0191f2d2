package bundle_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"

	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// What the console shows besides the forms: choices, links, the examples' needs and the privileges, each
// held to the source it must not drift from.

func ownedKind(t *testing.T, b *manifests.Bundle, kind string) operatorsv1alpha1.CRDDescription {
	t.Helper()
	for _, o := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		if o.Kind == kind {
			return o
		}
	}
	t.Fatalf("the CSV owns no %s", kind)
	return operatorsv1alpha1.CRDDescription{}
}

// The console offers spec.version as a choice of exactly the versions the operator has images for
// (internal/versions; hack/versionmarkers writes them into the marker), and the CRD defaults to the
// operator's default.
func TestVersionChoicesAreTheSupportedVersions(t *testing.T) {
	b := loadBundle(t)
	o := ownedKind(t, b, "EtcdCluster")
	d, ok := specDescriptors(o)["version"]
	if !ok {
		t.Fatal("EtcdCluster spec.version has no specDescriptor")
	}
	const sel = "urn:alm:descriptor:com.tectonic.ui:select:"
	var choices []string
	for _, x := range d.xDescriptors {
		if v, ok := strings.CutPrefix(x, sel); ok {
			choices = append(choices, v)
		} else {
			t.Errorf("spec.version: x-descriptor %s beside the choices (the console would not show a select)", x)
		}
	}
	if !slices.Equal(choices, versions.Supported) {
		t.Errorf("spec.version offers %v, the operator supports %v: run make manifests bundle", choices, versions.Supported)
	}
	def := crdFor(t, b, o).Properties["spec"].Properties["version"].Default
	if def == nil || string(def.Raw) != fmt.Sprintf("%q", versions.Default) {
		t.Errorf("the CRD defaults spec.version to %v, the operator to %s", def, versions.Default)
	}
}

// The client Service is a link to the Service, not text.
func TestClientServiceIsAServiceLink(t *testing.T) {
	o := ownedKind(t, loadBundle(t), "EtcdCluster")
	d, ok := statusDescriptors(o)["endpoints.clientServiceName"]
	if !ok || !slices.Contains(d.xDescriptors, "urn:alm:descriptor:io.kubernetes:Service") {
		t.Errorf("status.endpoints.clientServiceName should carry urn:alm:descriptor:io.kubernetes:Service: %+v", d)
	}
}

func TestLinksNameDocsAndIssues(t *testing.T) {
	b := loadBundle(t)
	want := map[string]string{
		"Documentation": "https://github.com/etcd-autopilot/etcd-autopilot/tree/main/docs",
		"Issues":        "https://github.com/etcd-autopilot/etcd-autopilot/issues",
	}
	for name, url := range want {
		if !slices.ContainsFunc(b.CSV.Spec.Links, func(l operatorsv1alpha1.AppLink) bool { return l.Name == name && l.URL == url }) {
			t.Errorf("spec.links has no %s link to %s: %+v", name, url, b.CSV.Spec.Links)
		}
	}
}

// The maturity is the API's: alpha while every owned API version is, and the description says so.
func TestMaturityIsTheAPIs(t *testing.T) {
	b := loadBundle(t)
	for _, o := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		if !strings.Contains(o.Version, "alpha") {
			t.Skipf("%s is served as %s: decide the maturity again", o.Kind, o.Version)
		}
	}
	if b.CSV.Spec.Maturity != "alpha" {
		t.Errorf("maturity %q, but every owned API is alpha", b.CSV.Spec.Maturity)
	}
	if !strings.Contains(b.CSV.Spec.Description, "The API is alpha") {
		t.Error("the description should say that the API is alpha (\"The API is alpha ...\")")
	}
}

// permissionsSection is the description's section on permissions; its list items name the cluster-wide
// permissions: "* `resource` (verb, verb) and `resource` (verb): why".
var (
	permissionsSection = regexp.MustCompile("(?s)## Install modes and permissions\n(.*?)(\n## |$)")
	permissionItem     = regexp.MustCompile("`([a-z.]+)` \\(([a-z, ]+)\\)")
)

// The description's list of cluster-wide privileges is exactly the CSV's clusterPermissions: a user
// granting them reads what they are for, and nothing is granted that the list leaves out.
func TestDescriptionListsTheClusterPermissions(t *testing.T) {
	b := loadBundle(t)
	granted := map[string]bool{}
	for _, p := range b.CSV.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		for _, r := range p.Rules {
			if len(r.NonResourceURLs) > 0 {
				t.Errorf("clusterPermissions grant non-resource URLs %v: the description's list names resources only", r.NonResourceURLs)
			}
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted[res+" "+v] = true
				}
			}
		}
	}
	m := permissionsSection.FindStringSubmatch(b.CSV.Spec.Description)
	if m == nil {
		t.Fatal("the description has no \"## Install modes and permissions\" section")
	}
	listed := map[string]bool{}
	var item string
	flush := func() {
		head, _, _ := strings.Cut(item, ": ")
		for _, p := range permissionItem.FindAllStringSubmatch(head, -1) {
			for _, v := range strings.Split(p[2], ",") {
				listed[p[1]+" "+strings.TrimSpace(v)] = true
			}
		}
		item = ""
	}
	for _, l := range strings.Split(m[1], "\n") {
		switch {
		case strings.HasPrefix(l, "* "):
			flush()
			item = l[2:]
		case item != "" && strings.HasPrefix(l, "  "):
			item += " " + strings.TrimSpace(l)
		default:
			flush()
		}
	}
	flush()
	if len(listed) == 0 {
		t.Fatal("the permissions section lists no \"* `resource` (verbs): why\" item")
	}
	for _, p := range slices.Sorted(maps.Keys(granted)) {
		if !listed[p] {
			t.Errorf("clusterPermissions grant %q, which the description's list does not name", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(listed)) {
		if !granted[p] {
			t.Errorf("the description lists %q, which clusterPermissions do not grant", p)
		}
	}
}

// Every example says in alm-examples-metadata what it needs beyond itself: each object it names (a
// field with an io.kubernetes:<Kind> x-descriptor, or clusterName) appears in its description as
// "<Kind> <name>", and a cluster it names is the EtcdCluster example. The API server's acceptance of the
// examples (schema, CEL, defaults) is TestExamplesAndQuickStartAreAcceptedByTheAPIServer.
func TestExamplesSayWhatTheyNeed(t *testing.T) {
	b := loadBundle(t)
	var examples []struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     map[string]any
	}
	if err := json.Unmarshal([]byte(b.CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	var meta map[string]struct{ Description string }
	if err := json.Unmarshal([]byte(b.CSV.Annotations["alm-examples-metadata"]), &meta); err != nil {
		t.Fatalf("alm-examples-metadata: %v", err)
	}
	clusters := map[string]bool{}
	names := map[string]bool{}
	for _, e := range examples {
		names[e.Metadata.Name] = true
		if e.Kind == "EtcdCluster" {
			clusters[e.Metadata.Name] = true
		}
	}
	for name := range meta {
		if !names[name] {
			t.Errorf("alm-examples-metadata describes %q, which is no example's name", name)
		}
	}
	for _, e := range examples {
		desc := meta[e.Metadata.Name].Description
		if strings.TrimSpace(desc) == "" {
			t.Errorf("%s %s has no description in alm-examples-metadata", e.Kind, e.Metadata.Name)
			continue
		}
		descs := specDescriptors(ownedKind(t, b, e.Kind))
		var walk func(prefix string, v any)
		walk = func(path string, v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, c := range v {
					p := k
					if path != "" {
						p = path + "." + k
					}
					walk(p, c)
				}
			case string:
				kind := ""
				if strings.HasSuffix(path, "clusterName") {
					kind = "EtcdCluster"
					if !clusters[v] {
						t.Errorf("%s %s: %s names EtcdCluster %q, which no example creates", e.Kind, e.Metadata.Name, path, v)
					}
				}
				for _, x := range descs[path].xDescriptors {
					if k, ok := strings.CutPrefix(x, "urn:alm:descriptor:io.kubernetes:"); ok {
						kind = k
					}
				}
				if kind != "" && !strings.Contains(desc, kind+" "+v) {
					t.Errorf("%s %s needs %s %s (spec.%s), which its alm-examples-metadata description does not say: %q", e.Kind, e.Metadata.Name, kind, v, path, desc)
				}
			}
		}
		walk("", e.Spec)
	}
}
