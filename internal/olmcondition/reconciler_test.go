package olmcondition_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/crds"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/olmcondition"
)

// A real kube-apiserver (envtest) with our CRDs and OLM's OperatorCondition CRD, as
// operator-framework/api ships it.
var (
	admin  client.Client
	cfg    *rest.Config
	env    *envtest.Environment
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, etcdv1alpha1.AddToScheme, operatorsv2.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		CRDs:                  []*apiextensionsv1.CustomResourceDefinition{crds.OperatorCondition()},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	if cfg, err = env.Start(); err != nil {
		_ = env.Stop()
		panic("start envtest (run `make envtest-assets`, KUBEBUILDER_ASSETS=bin): " + err.Error())
	}
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// operatorClient is a client with what the operator has under OLM for this: the Role OLM makes for the
// OperatorCondition (get/update/patch on that one object) and read access to EtcdClusters.
func operatorClient(t *testing.T, ns, condition string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	userName := "system:serviceaccount:" + ns + ":etcd-autopilot"
	user, err := env.AddUser(envtest.User{Name: userName}, nil)
	if err != nil {
		t.Fatal(err)
	}
	roles := []rbacv1.Role{
		{ObjectMeta: metav1.ObjectMeta{Name: condition, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"operators.coreos.com"}, Resources: []string{"operatorconditions"},
			ResourceNames: []string{condition}, Verbs: []string{"get", "update", "patch"},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "etcdclusters-reader", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{etcdv1alpha1.GroupVersion.Group}, Resources: []string{"etcdclusters"}, Verbs: []string{"get", "list", "watch"},
		}}},
	}
	for _, r := range roles {
		if err := admin.Create(ctx, &r); err != nil {
			t.Fatal(err)
		}
		b := rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: userName}},
		}
		if err := admin.Create(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	return user.Config()
}

func upgradeable(t *testing.T, key types.NamespacedName) *metav1.Condition {
	t.Helper()
	var oc operatorsv2.OperatorCondition
	if err := admin.Get(context.Background(), key, &oc); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(oc.Spec.Conditions, operatorsv2.Upgradeable)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startOperator runs the Reconciler as the operator would under OLM: with only OLM's grant, its cache
// in the namespace.
func startOperator(t *testing.T, ns string, key types.NamespacedName) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(operatorClient(t, ns, key.Name), ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		// one operator per test, in one process
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&olmcondition.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Key: key}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// The operator, with only OLM's grant, holds its own upgrade while a cluster changes version and
// releases it when the change is done; an idle operator does not write.
func TestOperatorConditionFollowsTheClusters(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "follows")
	key := types.NamespacedName{Namespace: ns, Name: "etcd-autopilot.v0.2.0"}
	startOperator(t, ns, key)

	// OLM creates the OperatorCondition with the CSV; the operator may start before it exists.
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"}}
	if err := admin.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	oc := &operatorsv2.OperatorCondition{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}
	if err := admin.Create(ctx, oc); err != nil {
		t.Fatal(err)
	}
	// The missing object is looked for again after a minute; an EtcdCluster event comes sooner.
	setUpgrading := func(s metav1.ConditionStatus, reason string) {
		t.Helper()
		if err := admin.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			t.Fatal(err)
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionUpgrading, Status: s, Reason: reason, Message: "m"})
		if err := admin.Status().Update(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	setUpgrading(metav1.ConditionTrue, "Upgrading")
	waitFor(t, "Upgradeable=False", func() bool {
		u := upgradeable(t, key)
		return u != nil && u.Status == metav1.ConditionFalse
	})
	u := upgradeable(t, key)
	if u.Reason != olmcondition.ReasonVersionChange || !strings.Contains(u.Message, ns+"/main") {
		t.Fatalf("Upgradeable=False: reason %s, message %q", u.Reason, u.Message)
	}

	setUpgrading(metav1.ConditionFalse, "UpToDate")
	waitFor(t, "Upgradeable=True", func() bool {
		u := upgradeable(t, key)
		return u != nil && u.Status == metav1.ConditionTrue
	})

	// Idle: more cluster events, no more writes to the OperatorCondition.
	if err := admin.Get(ctx, key, oc); err != nil {
		t.Fatal(err)
	}
	rv := oc.ResourceVersion
	if err := admin.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
	c.Labels = map[string]string{"touched": "yes"}
	if err := admin.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := admin.Get(ctx, key, oc); err != nil {
		t.Fatal(err)
	}
	if oc.ResourceVersion != rv {
		t.Fatalf("the OperatorCondition was written with nothing to change (resourceVersion %s -> %s)", rv, oc.ResourceVersion)
	}
}

// A False left by an operator that went away mid-operation is lifted at start even when no cluster is
// left to send an event.
func TestStaleFalseIsLiftedAtStart(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "stale")
	key := types.NamespacedName{Namespace: ns, Name: "etcd-autopilot.v0.2.0"}
	oc := &operatorsv2.OperatorCondition{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}
	oc.Spec.Conditions = []metav1.Condition{{Type: operatorsv2.Upgradeable, Status: metav1.ConditionFalse,
		Reason: olmcondition.ReasonRestore, Message: "m", LastTransitionTime: metav1.Now()}}
	if err := admin.Create(ctx, oc); err != nil {
		t.Fatal(err)
	}
	startOperator(t, ns, key)
	waitFor(t, "Upgradeable=True", func() bool {
		u := upgradeable(t, key)
		return u != nil && u.Status == metav1.ConditionTrue && u.Reason == olmcondition.ReasonUpgradeable
	})
}
