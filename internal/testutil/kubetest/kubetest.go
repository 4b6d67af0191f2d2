// Package kubetest starts a real kube-apiserver (envtest) for a test package's TestMain.
package kubetest

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"
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
