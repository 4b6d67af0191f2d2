package robustness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdbackup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdbackupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdcluster"
)

var (
	cfg    *rest.Config
	scheme = runtime.NewScheme()
	k8s    client.Client
)

func TestMain(m *testing.M) {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	var err error
	cfg, err = env.Start()
	if err != nil {
		_ = env.Stop()
		panic("start envtest (KUBEBUILDER_ASSETS=bin, `make envtest-assets`): " + err.Error())
	}
	// ROBUSTNESS_LOG=1 shows the manager's log, to see why an object got no condition.
	if os.Getenv("ROBUSTNESS_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, etcdv1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}
	code := m.Run()
	stopSharedManager()
	_ = env.Stop()
	os.Exit(code)
}

// runningManager is a manager with the operator's three reconcilers, watching one namespace (so
// the tests of this package do not share objects), started in the background.
type runningManager struct {
	cancel context.CancelFunc
	exited chan error // receives Start's result once it returns
}

// startManager starts a manager as main.go wires it, except that a panic in a reconciler is not
// recovered: it fails the test binary instead of hiding in a log line.
func startManager(namespace string) (*runningManager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Controller: config.Controller{
			SkipNameValidation: ptr.To(true), // one manager per test, in one process
			RecoverPanic:       ptr.To(false),
			CacheSyncTimeout:   20 * time.Second,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("new manager: %w", err)
	}
	rec := mgr.GetEventRecorderFor("etcd-autopilot")
	const image = "example.test/etcd-autopilot:test"
	if err := (&etcdcluster.EtcdClusterReconciler{Client: mgr.GetClient(), Scheme: scheme, Recorder: rec, OperatorImage: image}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&etcdbackup.EtcdBackupReconciler{Client: mgr.GetClient(), Recorder: rec, OperatorImage: image}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&etcdbackupschedule.EtcdBackupScheduleReconciler{Client: mgr.GetClient(), Recorder: rec, OperatorImage: image}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rm := &runningManager{cancel: cancel, exited: make(chan error, 1)}
	go func() { rm.exited <- mgr.Start(ctx) }()
	return rm, nil
}

// alive fails t when the manager has returned.
func (rm *runningManager) alive(t testing.TB) {
	t.Helper()
	select {
	case err := <-rm.exited:
		rm.exited <- err
		t.Fatalf("the manager exited: %v", err)
	default:
	}
}

func newNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// conditions reads an object's status.conditions as type -> reason.
func conditions(t testing.TB, u *unstructured.Unstructured) (map[string]string, error) {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), got); err != nil {
		return nil, err
	}
	list, _, err := unstructured.NestedSlice(got.Object, "status", "conditions")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range list {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		reason, _ := m["reason"].(string)
		out[typ] = reason
	}
	return out, nil
}

func eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
