package monitoring_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoring"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/kubetest"
)

var (
	cfg *rest.Config
	env *envtest.Environment
)

// A real kube-apiserver (envtest) with the EtcdCluster CRDs that starts without the monitoring API;
// the tests install the Prometheus Operator's own CRDs (the version hack/olm/monitoring-crds pins)
// part-way.
func TestMain(m *testing.M) {
	env = &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	kubetest.Main(m, env, &cfg)
}

// monitoringCRDs is the directory of the Prometheus Operator's CRDs in its Go module.
func monitoringCRDs(t *testing.T) string {
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/prometheus-operator/prometheus-operator")
	cmd.Dir = filepath.Join("..", "..", "hack", "olm", "monitoring-crds")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locate the Prometheus Operator module: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %s", out)
	}
	return filepath.Join(mod.Dir, "example", "prometheus-operator-crd")
}

// installMonitoringCRDs installs the Prometheus Operator's CRDs (again: installing is idempotent,
// so each test can run alone) and returns once they are served.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{monitoringCRDs(t)}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
}

// operatorConfig is a client with only what the operator holds: the monitoring Role
// (config/rbac/leader-election/monitoring_role.yaml, the metrics Service) in its namespace ns, and
// the generated manager role (config/rbac/role.yaml) in ns and each watched namespace, as OLM grants
// it in the OwnNamespace, SingleNamespace and MultiNamespace install modes.
func operatorConfig(t *testing.T, user, ns string, watched ...string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	var role rbacv1.Role
	readYAML(t, filepath.Join("..", "..", "config", "rbac", "leader-election", "monitoring_role.yaml"), &role)
	role.Name, role.Namespace = user+"-"+role.Name, ns
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, user)
	var manager rbacv1.ClusterRole
	readYAML(t, filepath.Join("..", "..", "config", "rbac", "role.yaml"), &manager)
	manager.Name = user + "-" + manager.Name
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &manager, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range append([]string{ns}, watched...) {
		bind(t, w, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: manager.Name}, user)
	}
	u, err := env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u.Config()
}

// readYAML reads the first object of a YAML file into out.
func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(strings.Split(string(raw), "\n---\n")[0]), out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// bind grants user the role in ns.
func bind(t *testing.T, ns string, role rbacv1.RoleRef, user string) {
	t.Helper()
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role.Name, Namespace: ns},
		RoleRef: role, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}}}
	if _, err := kubernetes.NewForConfigOrDie(cfg).RbacV1().RoleBindings(ns).Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Without the monitoring API the operator reads and writes nothing and says why; once the
// Prometheus Operator's CRDs appear, its ServiceMonitors and PrometheusRule follow at the next pass,
// owned by its metrics Service; an idle pass writes nothing; an older revision is brought up to date.
func TestMonitoringObjectsFollowTheAPI(t *testing.T) {
	ctx := context.Background()
	const ns = "operators"
	admin := kubernetes.NewForConfigOrDie(cfg)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: monitoring.MetricsService},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	op := operatorConfig(t, "operator", ns)
	s := &monitoring.Syncer{
		Discovery: discovery.NewDiscoveryClientForConfigOrDie(op), Dynamic: dynamic.NewForConfigOrDie(op),
		Core: kubernetes.NewForConfigOrDie(op), Namespace: ns, Scope: monitoring.ScopeClusterWide, Log: testr.New(t),
	}

	if got, err := s.Sync(ctx); err != nil || got != monitoring.APIMissing {
		t.Fatalf("without the monitoring API: %v, %v; want APIMissing and no error", got, err)
	}

	installMonitoringCRDs(t)
	// InstallCRDs waits until the CRDs are served; the next pass sees them.
	if got, err := s.Sync(ctx); err != nil || got != monitoring.Applied {
		t.Fatalf("with the monitoring API: %v, %v; want Applied", got, err)
	}
	want, err := monitoring.Desired(ns)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	versions := map[string]string{}
	for _, o := range want {
		live, err := dyn.Resource(o.Resource).Namespace(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if refs := live.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != svc.UID {
			t.Errorf("%s %s: owners %+v, want the metrics Service", o.GetKind(), o.GetName(), refs)
		}
		versions[o.GetName()] = live.GetResourceVersion()
	}
	if len(versions) != 3 {
		t.Fatalf("%d objects, want the operator's and the members' ServiceMonitors and the PrometheusRule", len(versions))
	}

	if got, err := s.Sync(ctx); err != nil || got != monitoring.UpToDate {
		t.Fatalf("idle pass: %v, %v; want UpToDate", got, err)
	}
	for _, o := range want {
		live, err := dyn.Resource(o.Resource).Namespace(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil || live.GetResourceVersion() != versions[o.GetName()] {
			t.Errorf("%s %s written by an idle pass (%v)", o.GetKind(), o.GetName(), err)
		}
	}

	// What an older operator applied, and a deleted object: both back at the next pass.
	rule := want[2]
	patch := []byte(`{"metadata":{"annotations":{"` + monitoring.AnnotationRevision + `":"older"}},"spec":{"groups":[]}}`)
	if _, err := dyn.Resource(rule.Resource).Namespace(ns).Patch(ctx, rule.GetName(), "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(want[0].Resource).Namespace(ns).Delete(ctx, want[0].GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Sync(ctx); err != nil || got != monitoring.Applied {
		t.Fatalf("after an older revision and a deletion: %v, %v; want Applied", got, err)
	}
	live, err := dyn.Resource(rule.Resource).Namespace(ns).Get(ctx, rule.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if groups, _, _ := unstructured.NestedSlice(live.Object, "spec", "groups"); len(groups) == 0 {
		t.Error("the PrometheusRule kept the older revision's empty groups")
	}
	if _, err := dyn.Resource(want[0].Resource).Namespace(ns).Get(ctx, want[0].GetName(), metav1.GetOptions{}); err != nil {
		t.Errorf("the deleted ServiceMonitor was not re-created: %v", err)
	}
}

// clusterCache is the operator's cache of EtcdClusters: the watched namespaces only, read with the
// operator's own rights.
func clusterCache(t *testing.T, ctx context.Context, op *rest.Config, watched ...string) cache.Cache {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]cache.Config{}
	for _, ns := range watched {
		namespaces[ns] = cache.Config{}
	}
	c, err := cache.New(op, cache.Options{Scheme: scheme, DefaultNamespaces: namespaces})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &etcdv1alpha1.EtcdCluster{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the EtcdCluster cache did not sync")
	}
	return c
}

// waitCached waits until the cache holds exactly n EtcdClusters.
func waitCached(t *testing.T, ctx context.Context, c cache.Cache, n int) {
	t.Helper()
	for range 100 {
		var list etcdv1alpha1.EtcdClusterList
		if err := c.List(ctx, &list); err == nil && len(list.Items) == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the cache never held %d EtcdClusters", n)
}

func createCluster(t *testing.T, ctx context.Context, admin client.Client, ns, name string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Replicas = 3
	c.Spec.Storage.Size = resource.MustParse("1Gi")
	if err := admin.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// liveNames lists "Kind/name" of the monitoring objects in ns.
func liveNames(t *testing.T, ctx context.Context, dyn dynamic.Interface, ns string) []string {
	t.Helper()
	var out []string
	for kind, res := range map[string]string{"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"} {
		list, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: res}).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out = append(out, kind+"/"+o.GetName())
		}
	}
	sort.Strings(out)
	return out
}

// ownerNames lists the owners of a monitoring object by name.
func ownerNames(t *testing.T, ctx context.Context, dyn dynamic.Interface, res, ns, name string) []string {
	t.Helper()
	o, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: res}).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range o.GetOwnerReferences() {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

// Off OpenShift, one cluster-wide set in the operator's namespace whatever the clusters. On
// OpenShift (its API installed part-way), each watched namespace with EtcdClusters gets the members'
// ServiceMonitor and rules, owned by its clusters; the operator's namespace keeps the operator's
// monitor and rules and loses the cluster-wide members' monitor the operator made, but not a
// namesake it did not make. A cluster leaving takes its owner reference; the last one leaving takes
// its namespace's objects. A namespace the operator does not watch gets nothing.
func TestMemberObjectsPerNamespaceOnOpenShift(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, apps, db, elsewhere = "operators-uwm", "apps", "db", "elsewhere"
	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(admin.Scheme()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ns, apps, db, elsewhere} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: monitoring.MetricsService, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443}}}}); err != nil {
		t.Fatal(err)
	}
	installMonitoringCRDs(t)
	dyn := dynamic.NewForConfigOrDie(cfg)
	rules := schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
	// someone else's object under the name of the members' rules, in the operator's namespace
	theirs := &unstructured.Unstructured{Object: map[string]any{"apiVersion": monitoring.GroupVersion, "kind": "PrometheusRule",
		"metadata": map[string]any{"name": monitoring.MemberRulesName, "namespace": ns}, "spec": map[string]any{"groups": []any{}}}}
	if _, err := dyn.Resource(rules).Namespace(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	op := operatorConfig(t, "operator-uwm", ns, apps, db)
	clusters := clusterCache(t, ctx, op, ns, apps, db)
	s := &monitoring.Syncer{
		Discovery: discovery.NewDiscoveryClientForConfigOrDie(op), Dynamic: dynamic.NewForConfigOrDie(op),
		Core: kubernetes.NewForConfigOrDie(op), Clusters: clusters, Namespace: ns, Log: testr.New(t),
	}
	a := createCluster(t, ctx, admin, apps, "a")
	waitCached(t, ctx, clusters, 1)
	if got, err := s.Sync(ctx); err != nil || got != monitoring.Applied {
		t.Fatalf("off OpenShift: %v, %v; want Applied", got, err)
	}
	shipped := []string{"PrometheusRule/etcd-autopilot-etcd-member-rules", "PrometheusRule/etcd-autopilot-etcd-rules", "ServiceMonitor/etcd-autopilot-controller-manager-metrics-monitor", "ServiceMonitor/etcd-autopilot-etcd-members"}
	if got := liveNames(t, ctx, dyn, ns); !reflect.DeepEqual(got, shipped) {
		t.Errorf("off OpenShift, the operator's namespace holds %v; want the shipped objects and their namesake %v", got, shipped)
	}
	if got := liveNames(t, ctx, dyn, apps); len(got) != 0 {
		t.Errorf("off OpenShift, a cluster's namespace holds %v; want nothing (the cluster-wide monitor scrapes it)", got)
	}

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{kubetest.OpenShiftCRD()}}); err != nil {
		t.Fatal(err)
	}
	createCluster(t, ctx, admin, db, "c")
	createCluster(t, ctx, admin, db, "b")
	createCluster(t, ctx, admin, elsewhere, "x")
	waitCached(t, ctx, clusters, 3)
	if got, err := s.Sync(ctx); err != nil || got != monitoring.Applied {
		t.Fatalf("on OpenShift: %v, %v; want Applied", got, err)
	}
	members := []string{"PrometheusRule/etcd-autopilot-etcd-member-rules", "ServiceMonitor/etcd-autopilot-etcd-members"}
	for _, tc := range []struct {
		ns   string
		want []string
	}{
		{ns, []string{"PrometheusRule/etcd-autopilot-etcd-member-rules", "PrometheusRule/etcd-autopilot-etcd-rules", "ServiceMonitor/etcd-autopilot-controller-manager-metrics-monitor"}},
		{apps, members}, {db, members}, {elsewhere, nil},
	} {
		if got := liveNames(t, ctx, dyn, tc.ns); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("on OpenShift, %s holds %v; want %v", tc.ns, got, tc.want)
		}
	}
	if got, _ := dyn.Resource(rules).Namespace(ns).Get(ctx, monitoring.MemberRulesName, metav1.GetOptions{}); got == nil || len(got.GetOwnerReferences()) != 0 {
		t.Error("the namesake the operator did not make was changed")
	}
	if got := ownerNames(t, ctx, dyn, "servicemonitors", db, "etcd-autopilot-etcd-members"); !reflect.DeepEqual(got, []string{"EtcdCluster/b", "EtcdCluster/c"}) {
		t.Errorf("the members' monitor of %s is owned by %v; want its clusters", db, got)
	}
	if got := ownerNames(t, ctx, dyn, "prometheusrules", apps, monitoring.MemberRulesName); !reflect.DeepEqual(got, []string{"EtcdCluster/a"}) {
		t.Errorf("the members' rules of %s are owned by %v; want its cluster", apps, got)
	}
	if got, err := s.Sync(ctx); err != nil || got != monitoring.UpToDate {
		t.Fatalf("idle pass on OpenShift: %v, %v; want UpToDate", got, err)
	}

	if err := admin.Delete(ctx, &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: db, Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitCached(t, ctx, clusters, 1)
	if got, err := s.Sync(ctx); err != nil || got != monitoring.Applied {
		t.Fatalf("after clusters left: %v, %v; want Applied", got, err)
	}
	if got := liveNames(t, ctx, dyn, apps); len(got) != 0 {
		t.Errorf("%s lost its last cluster but still holds %v", apps, got)
	}
	if got := ownerNames(t, ctx, dyn, "servicemonitors", db, "etcd-autopilot-etcd-members"); !reflect.DeepEqual(got, []string{"EtcdCluster/b"}) {
		t.Errorf("after c left, the members' monitor of %s is owned by %v; want b alone", db, got)
	}
}

// A namespace that refuses the operator (here: no role there, while the cache, read as an admin,
// still shows its cluster) fails the pass, but every other namespace still gets its objects.
func TestOneNamespaceRefusingHoldsUpNoOther(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, open, closed = "operators-refused", "open", "closed"
	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(admin.Scheme()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ns, open, closed} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	installMonitoringCRDs(t)
	op := operatorConfig(t, "operator-refused", ns, open)
	clusters := clusterCache(t, ctx, cfg, ns, open, closed)
	createCluster(t, ctx, admin, closed, "f")
	createCluster(t, ctx, admin, open, "o")
	waitCached(t, ctx, clusters, 2)
	s := &monitoring.Syncer{
		Discovery: discovery.NewDiscoveryClientForConfigOrDie(op), Dynamic: dynamic.NewForConfigOrDie(op),
		Core: kubernetes.NewForConfigOrDie(op), Clusters: clusters, Namespace: ns, Scope: monitoring.ScopePerNamespace, Log: testr.New(t),
	}
	if _, err := s.Sync(ctx); err == nil || !strings.Contains(err.Error(), closed) {
		t.Errorf("the refused write was not reported: %v", err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	if got, want := liveNames(t, ctx, dyn, open), []string{"PrometheusRule/" + monitoring.MemberRulesName, "ServiceMonitor/etcd-autopilot-etcd-members"}; !reflect.DeepEqual(got, want) {
		t.Errorf("%s holds %v; want %v", open, got, want)
	}
	if got := liveNames(t, ctx, dyn, closed); len(got) != 0 {
		t.Errorf("%s holds %v, written without a role there", closed, got)
	}
}
