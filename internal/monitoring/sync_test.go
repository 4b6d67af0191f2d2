package monitoring_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoring"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/kubetest"
)

var (
	cfg *rest.Config
	env *envtest.Environment
)

// A real kube-apiserver (envtest) that starts without the monitoring API; the test installs the
// Prometheus Operator's own CRDs (the version hack/olm/monitoring-crds pins) part-way.
func TestMain(m *testing.M) {
	env = &envtest.Environment{}
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

// operatorConfig is a client with only what the operator's monitoring Role grants
// (config/rbac/leader-election/monitoring_role.yaml) in ns.
func operatorConfig(t *testing.T, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "leader-election", "monitoring_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal([]byte(strings.Split(string(raw), "\n---\n")[0]), &role); err != nil {
		t.Fatal(err)
	}
	role.Namespace = ns
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user, err := env.AddUser(envtest.User{Name: "operator"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "operator"}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return user.Config()
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
	op := operatorConfig(t, ns)
	s := &monitoring.Syncer{
		Discovery: discovery.NewDiscoveryClientForConfigOrDie(op), Dynamic: dynamic.NewForConfigOrDie(op),
		Core: kubernetes.NewForConfigOrDie(op), Namespace: ns, Log: testr.New(t),
	}

	if got, err := s.Sync(ctx); err != nil || got != monitoring.APIMissing {
		t.Fatalf("without the monitoring API: %v, %v; want APIMissing and no error", got, err)
	}

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{monitoringCRDs(t)}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
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
