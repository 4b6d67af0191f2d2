package bundle_test

import (
	"fmt"
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