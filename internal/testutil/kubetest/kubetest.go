// Package kubetest starts a real kube-apiserver (envtest) for a test package's TestMain.
package kubetest

import (
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Main starts env, points *cfg at it, runs the package's tests, stops env and exits with the tests'
// code. A start that fails panics with how to get the binaries envtest needs.
func Main(m *testing.M, env *envtest.Environment, cfg **rest.Config) {
	var err error
	if *cfg, err = env.Start(); err != nil {
		_ = env.Stop()
		panic("start envtest (run `make envtest-assets`, KUBEBUILDER_ASSETS=bin): " + err.Error())
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// OpenShiftCRD stands in for OpenShift's SecurityContextConstraints API, the one the operator
// recognises OpenShift by (internal/platform): once installed, discovery sees the group and
// resource as on OpenShift (the operator reads nothing else of it).
func OpenShiftCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "securitycontextconstraints.security.openshift.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "security.openshift.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "securitycontextconstraints", Singular: "securitycontextconstraint", Kind: "SecurityContextConstraints", ListKind: "SecurityContextConstraintsList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
}
