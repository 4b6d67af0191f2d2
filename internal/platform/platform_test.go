package platform_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-autopilot/etcd-autopilot/internal/platform"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/kubetest"
)

var (
	cfg *rest.Config
	env *envtest.Environment
)

func TestMain(m *testing.M) {
	env = &envtest.Environment{}
	kubetest.Main(m, env, &cfg)
}

// sccCRD stands in for OpenShift's SecurityContextConstraints API: discovery sees the group and
// resource the same way (the operator reads nothing else of it).
func sccCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "securitycontextconstraints.security.openshift.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "security.openshift.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "securitycontextconstraints", Singular: "securitycontextconstraint", Kind: "SecurityContextConstraints", ListKind: "SecurityContextConstraintsList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}}}},
		},
	}
}

func ptrTrue() *bool { t := true; return &t }

// Kubernetes without OpenShift's API: the operator names 65532 unless told the platform assigns
// IDs; with the API (installed part-way, as discovery would see OpenShift), the platform assigns
// them unless told otherwise. A setting it does not know is refused rather than guessed.
func TestPodIDsFromDiscovery(t *testing.T) {
	d := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	check := func(stage, setting string, want resources.PodIDs) {
		t.Helper()
		got, err := platform.PodIDs(setting, d)
		if err != nil || got != want {
			t.Errorf("%s, POD_IDS=%q: %v, %v; want %v", stage, setting, got, err, want)
		}
	}
	check("plain Kubernetes", "", resources.FixedIDs)
	check("plain Kubernetes", "auto", resources.FixedIDs)
	check("plain Kubernetes", "platform", resources.PlatformIDs)
	if _, err := platform.PodIDs("openshift", d); err == nil {
		t.Error("an unknown POD_IDS value was accepted")
	}

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{sccCRD()}}); err != nil {
		t.Fatal(err)
	}
	check("OpenShift", "", resources.PlatformIDs)
	check("OpenShift", "auto", resources.PlatformIDs)
	check("OpenShift", "fixed", resources.FixedIDs)
}
