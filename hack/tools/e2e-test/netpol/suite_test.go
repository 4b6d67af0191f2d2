// Package netpol is a Ginkgo suite of the upstream Kubernetes NetworkPolicy e2e tests only
// (k8s.io/kubernetes/test/e2e/network/netpol), compiled with `go test -c` into bin/e2e.test.
//
// It does what upstream's test/e2e suite main does for these tests (the framework's flags, its
// per-test extensions, the JUnit report under --report-dir) without linking every other e2e package:
// the whole test/e2e package would compile storage, cloud and DRA tests that never run here, which
// costs much time on this machine's two cores.
package netpol

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"

	// the tests
	_ "k8s.io/kubernetes/test/e2e/network/netpol"

	// framework extensions upstream's suite installs: dump debug info on failure, check that all
	// nodes are still Ready after each test, gomega's object formatting
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/format"

	// logging flags (-v and friends)
	_ "k8s.io/component-base/logs/testinit"
)

func TestMain(m *testing.M) {
	showVersion := flag.Bool("version", false, "print the Kubernetes version the tests come from and exit")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	// validates the flags, sets up the provider and, with --report-dir, registers the JUnit report
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// Once, before any test: the cluster answers and all its nodes are Ready, so a broken cluster fails
// here instead of as a policy failure in every test.
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "load the client from --kubeconfig")
	v, err := c.Discovery().ServerVersion()
	framework.ExpectNoError(err, "read the server version")
	framework.Logf("kube-apiserver %s; tests from %s", v.GitVersion, version.Get().GitVersion)
	framework.ExpectNoError(e2enode.AllNodesReady(ctx, c, 5*time.Minute), "wait for all nodes Ready")
	return nil
}, func(context.Context, []byte) {})

func TestNetpol(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes NetworkPolicy e2e (upstream netpol)", suiteConfig, reporterConfig)
}
