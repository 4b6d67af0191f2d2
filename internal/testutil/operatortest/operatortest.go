// Package operatortest runs the operator against a real kube-apiserver (envtest) for the test
// suites of internal/controller/etcdcluster, etcdbackup and etcdbackupschedule: each suite runs the
// three reconcilers, as the operator does, under the operator's generated role, and builds its
// objects with the helpers here. No kubelet runs there, so pods stay Pending: the suites cover what
// the operator creates and records before etcd answers; the e2e suite covers the rest on a real
// cluster.
package operatortest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// k8s is the suite's administrator client, the one Main hands the test package.
var k8s client.Client

// Config reaches the envtest API server as its administrator; ManagerCache is the operator's cache
// (the cache tests look into both).
var (
	Config       *rest.Config
	ManagerCache cache.Cache
)

// Operator is what a suite builds the reconcilers from: the manager's client, scheme and event
// recorder, and the settings the operator's main would give them, with the test clock and the
// archive workers' endpoints the tests control.
type Operator struct {
	Client            client.Client
	Scheme            *runtime.Scheme
	Recorder          record.EventRecorder
	Image             string
	OperatorNamespace string
	// Now is the schedule controller's clock (ScheduleClock).
	Now func() time.Time
	// ArchiveStatusURL is where the schedule controller reads an archive worker's progress (ArchiveStatusBase).
	ArchiveStatusURL func(ip string) string
}

// Suite is how a test package runs the operator.
type Suite struct {
	// Cache is the manager's cache, as cmd/manager sets it.
	Cache cache.Options
	// Setup registers the three reconcilers with mgr.
	Setup func(mgr ctrl.Manager, op Operator) error
}

// Main starts envtest, grants the operator's role, starts the operator as s sets it up, points *admin
// at the API server as its administrator, runs the package's tests, checks the operator's calls
// against its role, stops envtest and exits with the tests' code.
func Main(m *testing.M, admin *client.Client, s Suite) {
	root, err := repoRoot()
	if err != nil {
		panic(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	suite := filepath.Base(wd) // go test runs a package's tests in its directory
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed start (say, a CRD the API server rejects) leaves its processes running
		panic("start envtest (KUBEBUILDER_ASSETS=bin, `make envtest-assets`): " + err.Error())
	}
	ctrl.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1alpha1.AddToScheme(scheme)
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	*admin = k8s
	// The operator runs with its generated role only (rbac.go), and its cache as in main.go.
	granted, err := grantOperatorRole(context.Background(), k8s, root)
	if err != nil {
		panic(err)
	}
	audit := NewAudit()
	mgr, err := ctrl.NewManager(audit.OperatorConfig(cfg), ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: s.Cache,
	})
	if err != nil {
		panic(err)
	}
	Config, ManagerCache = cfg, mgr.GetCache()
	op := Operator{
		Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorderFor("etcd-autopilot"),
		Image: TestOperatorImage, OperatorNamespace: OperatorNamespace, Now: ScheduleClock.Now, ArchiveStatusURL: archiveStatusURL,
	}
	if err := s.Setup(mgr, op); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()
	code := m.Run()
	cancel()
	if problems := audit.verdict(granted, suite); len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "the operator's RBAC role does not match its calls:\n  "+strings.Join(problems, "\n  "))
		code = 1
	}
	_ = env.Stop()
	os.Exit(code)
}

// RepoRoot is the repository's root: the nearest directory up from the test's that holds go.mod.
func RepoRoot(t *testing.T) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}
