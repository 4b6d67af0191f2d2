package bundle_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// The rules below are what makes the operator usable from the OpenShift console (and OperatorHub's
// page): a form field and a details row for everything a user sets or reads, examples that the API
// server accepts, and a description that gets a first cluster running.

// kubernetesTyped are fields of Kubernetes' own types that the console edits as YAML: leaves. (Its
// nodeAffinity/podAffinity widgets would need descriptors below podTemplate.affinity, on fields of
// corev1.Affinity, which no operator-sdk marker can reach.)
var kubernetesTyped = []string{"podTemplate.affinity"}

// objectWidgets are the console's x-descriptors that edit or show a whole object: a field carrying one
// is a leaf (the console does not descend into it), e.g. resources or an affinity.
var objectWidgets = []string{
	"urn:alm:descriptor:com.tectonic.ui:resourceRequirements",
	"urn:alm:descriptor:com.tectonic.ui:nodeAffinity",
	"urn:alm:descriptor:com.tectonic.ui:podAffinity",
	"urn:alm:descriptor:com.tectonic.ui:podAntiAffinity",
}

// operatorBookkeeping are status fields the operator keeps for itself (crash consistency, its own
// counters, annotations acted on): a user reads conditions, phase and the rest instead. A new status
// field is either described for users or listed here, deliberately.
var operatorBookkeeping = map[string][]string{
	"EtcdCluster": {
		"observedGeneration", "replicas", "selector", "clusterToken", "bootstrapped", "nextMemberIndex",
		"pendingOperation", "legacyWALIndex", "downgradeTarget", "tls.trustEpoch", "tls.rotateCAHandled",
		"tls.renewCertificatesHandled", "tls.userTrust",
	},
}

// userFields lists the paths (descriptor syntax, a.b.c) under an OpenAPI object a user sets or reads:
// every leaf, where arrays and maps are leaves (the console edits them whole) and so is an object
// whose descriptor has an object widget.
func userFields(s apiextensionsv1.JSONSchemaProps, prefix string, descs map[string]descriptor) []string {
	var out []string
	for name, p := range s.Properties {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		d, described := descs[path]
		leaf := p.Type != "object" || len(p.Properties) == 0 || // scalars, arrays, maps
			described && d.objectWidget() || slices.Contains(kubernetesTyped, path)
		if leaf {
			out = append(out, path)
		} else {
			out = append(out, userFields(p, path, descs)...)
		}
	}
	sort.Strings(out)
	return out
}

type descriptor struct {
	displayName, description string
	xDescriptors             []string
}

func (d descriptor) objectWidget() bool {
	return slices.ContainsFunc(d.xDescriptors, func(x string) bool { return slices.Contains(objectWidgets, x) })
}

func specDescriptors(o operatorsv1alpha1.CRDDescription) map[string]descriptor {
	m := map[string]descriptor{}
	for _, d := range o.SpecDescriptors {
		m[d.Path] = descriptor{d.DisplayName, d.Description, d.XDescriptors}
	}
	return m
}

func statusDescriptors(o operatorsv1alpha1.CRDDescription) map[string]descriptor {
	m := map[string]descriptor{}
	for _, d := range o.StatusDescriptors {
		m[d.Path] = descriptor{d.DisplayName, d.Description, d.XDescriptors}
	}
	return m
}

func crdFor(t *testing.T, b *manifests.Bundle, o operatorsv1alpha1.CRDDescription) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, crd := range b.V1CRDs {
		if crd.Name != o.Name {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == o.Version {
				return *v.Schema.OpenAPIV3Schema
			}
		}
	}
	t.Fatalf("the CSV owns %s %s, which the bundle has no CRD version for", o.Name, o.Version)
	return apiextensionsv1.JSONSchemaProps{}
}

func TestEveryUserFieldHasADescriptor(t *testing.T) {
	b := loadBundle(t)
	owned := b.CSV.Spec.CustomResourceDefinitions.Owned
	if len(owned) == 0 {
		t.Fatal("the CSV owns no CRDs")
	}
	for _, o := range owned {
		t.Run(o.Kind, func(t *testing.T) {
			root := crdFor(t, b, o)
			check := func(section string, descs map[string]descriptor, skip []string) {
				fields := userFields(root.Properties[section], "", descs)
				if len(fields) == 0 {
					t.Errorf("%s has no %s fields: the walk is broken", o.Kind, section)
				}
				for _, f := range fields {
					if slices.ContainsFunc(skip, func(s string) bool { return f == s || strings.HasPrefix(f, s+".") }) {
						continue
					}
					d, ok := descs[f]
					switch {
					case !ok:
						t.Errorf("%s.%s has no %sDescriptor", section, f, section)
					case strings.TrimSpace(d.displayName) == "":
						t.Errorf("%s.%s: the %sDescriptor has no displayName", section, f, section)
					case strings.TrimSpace(d.description) == "":
						t.Errorf("%s.%s: the %sDescriptor has no description (a Go doc comment on the field)", section, f, section)
					}
				}
				for _, s := range skip {
					if _, ok := descs[s]; ok {
						t.Errorf("%s.%s is listed as operator bookkeeping but has a descriptor", section, s)
					}
					if !slices.ContainsFunc(fields, func(f string) bool { return f == s || strings.HasPrefix(f, s+".") }) {
						t.Errorf("%s.%s is listed as operator bookkeeping but is no field of %s", section, s, o.Kind)
					}
				}
			}
			check("spec", specDescriptors(o), nil)
			check("status", statusDescriptors(o), operatorBookkeeping[o.Kind])
		})
	}
}

// apiServer starts a real kube-apiserver (envtest) with the bundle's CRDs: examples are checked by what
// a cluster's API server would say, CEL rules and defaults included.
func apiServer(t *testing.T, b *manifests.Bundle) client.Client {
	t.Helper()
	env := &envtest.Environment{CRDs: b.V1CRDs}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start envtest (run `make envtest-assets`, KUBEBUILDER_ASSETS=bin): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// accepted creates obj in a dry run: admission and validation without storing anything.
func accepted(t *testing.T, c client.Client, what string, obj *unstructured.Unstructured) {
	t.Helper()
	obj = obj.DeepCopy()
	if obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	if err := c.Create(context.Background(), obj, client.DryRunAll); err != nil {
		t.Errorf("%s (%s %s) is refused by the API server: %v", what, obj.GetKind(), obj.GetName(), err)
	}
}

// quickStart is the description's quick start: a "## Quick start" section with a YAML manifest.
var quickStart = regexp.MustCompile("(?s)## Quick start\n(.*?)(\n## |$)")
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

func TestExamplesAndQuickStartAreAcceptedByTheAPIServer(t *testing.T) {
	b := loadBundle(t)
	var examples []*unstructured.Unstructured
	if err := json.Unmarshal([]byte(b.CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	byKind := map[string]int{}
	for _, e := range examples {
		byKind[e.GetKind()]++
	}
	for _, o := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		if byKind[o.Kind] == 0 {
			t.Errorf("alm-examples has no %s: the console's Create %s form would start empty", o.Kind, o.Kind)
		}
	}

	var initRes *unstructured.Unstructured
	if raw := b.CSV.Annotations["operatorframework.io/initialization-resource"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &initRes); err != nil {
			t.Fatalf("operatorframework.io/initialization-resource: %v", err)
		}
	}

	m := quickStart.FindStringSubmatch(b.CSV.Spec.Description)
	if m == nil {
		t.Fatal("the CSV description has no \"## Quick start\" section")
	}
	manifests := yamlBlock.FindAllStringSubmatch(m[1], -1)
	if len(manifests) == 0 {
		t.Fatal("the quick start has no ```yaml manifest to apply")
	}
	if !strings.Contains(m[1], "kubectl ") || !strings.Contains(m[1], "status.endpoints") {
		t.Error("the quick start should say how to watch the cluster come up (kubectl) and how clients reach it (status.endpoints)")
	}

	c := apiServer(t, b)
	for _, e := range examples {
		accepted(t, c, "an alm-examples entry", e)
	}
	if initRes != nil {
		accepted(t, c, "the initialization resource", initRes)
	}
	for _, y := range manifests {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(y[1]), &obj.Object); err != nil {
			t.Fatalf("quick start manifest: %v", err)
		}
		if !slices.ContainsFunc(b.CSV.Spec.CustomResourceDefinitions.Owned, func(o operatorsv1alpha1.CRDDescription) bool { return o.Kind == obj.GetKind() }) {
			t.Errorf("the quick start creates a %s, which the operator does not own", obj.GetKind())
		}
		accepted(t, c, "the quick start manifest", &obj)
	}
}
