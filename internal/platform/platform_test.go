package platform_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{kubetest.OpenShiftCRD()}}); err != nil {
		t.Fatal(err)
	}
	check("OpenShift", "", resources.PlatformIDs)
	check("OpenShift", "auto", resources.PlatformIDs)
	check("OpenShift", "fixed", resources.FixedIDs)
}
