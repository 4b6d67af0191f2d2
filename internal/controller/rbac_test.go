package controller

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"
)

// The controllers in this suite run as the operator's ServiceAccount, bound to nothing but the role
// controller-gen renders from the +kubebuilder:rbac markers (config/rbac/role.yaml): a call the role
// does not allow is answered Forbidden by the real API server, and the suite fails on it. Every
// request is also recorded, so a rule the suite never needed fails it too (unless unusedGrants says
// why the suite cannot exercise it).
const (
	operatorNamespace      = "etcd-autopilot-system"
	operatorServiceAccount = "etcd-autopilot-controller-manager"
)

// unusedGrants are rules of role.yaml the envtest suite cannot exercise, with the reason; every
// other rule must be used by the suite. "group/resource verb", group empty for the core group.
var unusedGrants = map[string]string{
	// The API server checks these only when its OwnerReferencesPermissionEnforcement admission
	// plugin is on (OpenShift): setting blockOwnerDeletion on an owner reference needs update on the
	// owner's finalizers. envtest does not enable the plugin, so the grant is never consulted here.
	"etcd.autopilot.dev/etcdclusters/finalizers update":        "OwnerReferencesPermissionEnforcement",
	"etcd.autopilot.dev/etcdbackups/finalizers update":         "OwnerReferencesPermissionEnforcement",
	"etcd.autopilot.dev/etcdbackupschedules/finalizers update": "OwnerReferencesPermissionEnforcement",
	// No etcd answers in envtest (pods stay Pending), so no member pod of an earlier operator is
	// adopted (patch: its config-hash annotation), restarted, removed or replaced (pod and PVC
	// delete): actions.go does these, and the e2e suite runs them on a real cluster.
	"/pods patch":                    "adoption after an operator upgrade: e2e",
	"/pods delete":                   "member restart and removal: e2e",
	"/persistentvolumeclaims delete": "member replacement: e2e",
	// Certificates are renewed (the Secret updated) weeks before they expire: ensureTLS, with
	// internal/pki's tests for when.
	"/secrets update": "certificate renewal",
	// The monitoring objects are the Syncer's (internal/monitoring), not a controller's; its envtest
	// runs it with this role in the operator's namespace and those it serves.
	"monitoring.coreos.com/servicemonitors get":    "internal/monitoring",
	"monitoring.coreos.com/servicemonitors create": "internal/monitoring",
	"monitoring.coreos.com/servicemonitors patch":  "internal/monitoring",
	"monitoring.coreos.com/servicemonitors delete": "internal/monitoring",
	"monitoring.coreos.com/prometheusrules get":    "internal/monitoring",
	"monitoring.coreos.com/prometheusrules create": "internal/monitoring",
	"monitoring.coreos.com/prometheusrules patch":  "internal/monitoring",
	"monitoring.coreos.com/prometheusrules delete": "internal/monitoring",
}

// apiAudit records what the operator's client does and what the API server refuses it.
type apiAudit struct {
	mu        sync.Mutex
	info      request.RequestInfoFactory
	used      sets.Set[string]
	forbidden []string
}

func newAPIAudit() *apiAudit {
	return &apiAudit{
		info: request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")},
		used: sets.New[string](),
	}
}

// operatorConfig is cfg acting as the operator's ServiceAccount, with every request audited.
func (a *apiAudit) operatorConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", operatorNamespace, operatorServiceAccount),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
	}
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			key := a.key(req)
			resp, err := rt.RoundTrip(req)
			a.mu.Lock()
			defer a.mu.Unlock()
			if key != "" {
				a.used.Insert(key)
			}
			if err == nil && resp.StatusCode == http.StatusForbidden && deniedByRBAC(resp) {
				a.forbidden = append(a.forbidden, fmt.Sprintf("%s (%s %s)", key, req.Method, req.URL.Path))
			}
			return resp, err
		})
	})
	return out
}

// deniedByRBAC tells an authorization denial from the API server's other 403: creating an object
// in a namespace being deleted (a cause NamespaceTerminating), which the controllers handle.
func deniedByRBAC(resp *http.Response) bool {
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return true
	}
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	status, ok := obj.(*metav1.Status)
	if err != nil || !ok || status.Details == nil {
		return true
	}
	for _, c := range status.Details.Causes {
		if c.Type == corev1.NamespaceTerminatingCause {
			return false
		}
	}
	return true
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// key is "group/resource[/subresource] verb" of a resource request, "" for discovery and the like.
func (a *apiAudit) key(req *http.Request) string {
	ri, err := a.info.NewRequestInfo(req)
	if err != nil || !ri.IsResourceRequest {
		return ""
	}
	res := ri.APIGroup + "/" + ri.Resource
	if ri.Subresource != "" {
		res += "/" + ri.Subresource
	}
	return res + " " + ri.Verb
}

// operatorRoles are the ClusterRoles of the operator's own calls: the generated role (namespaced under
// OLM) and the cluster-scoped reads no Role can grant (always cluster-wide).
var operatorRoles = []string{"role.yaml", "cluster_reader_role.yaml"}

// grantOperatorRole creates the operatorRoles' ClusterRoles and binds the operator's ServiceAccount to
// them, cluster-wide: the suite's namespaces are made as it runs, as in the AllNamespaces install mode.
// It returns their rules as "group/resource verb" keys.
func grantOperatorRole(ctx context.Context, admin client.Client) (sets.Set[string], error) {
	granted := sets.New[string]()
	for _, file := range operatorRoles {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", file))
		if err != nil {
			return nil, fmt.Errorf("read the operator's role: %w", err)
		}
		// The first document is the ClusterRole (a binding may follow it).
		doc, _, _ := strings.Cut(strings.TrimPrefix(string(raw), "---\n"), "\n---\n")
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), role); err != nil {
			return nil, fmt.Errorf("parse the role in %s: %w", file, err)
		}
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					for _, v := range rule.Verbs {
						granted.Insert(g + "/" + r + " " + v)
					}
				}
			}
		}
		if err := admin.Create(ctx, role); err != nil {
			return nil, fmt.Errorf("create the operator's role %s: %w", role.Name, err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: operatorNamespace, Name: operatorServiceAccount}},
		}
		binding.Name = role.Name
		if err := admin.Create(ctx, binding); err != nil {
			return nil, fmt.Errorf("bind the operator's role %s: %w", role.Name, err)
		}
	}
	return granted, nil
}

// verdict says what is wrong with the role after the suite: calls it refused, and — when the whole
// suite ran (no -run filter) — rules no call needed.
func (a *apiAudit) verdict(granted sets.Set[string]) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var problems []string
	for _, f := range slices.Compact(slices.Sorted(slices.Values(a.forbidden))) {
		problems = append(problems, "forbidden: "+f+": add the verb to a +kubebuilder:rbac marker and run `make manifests`")
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		return problems
	}
	unused := granted.Difference(a.used)
	for k := range unusedGrants {
		unused.Delete(k)
	}
	keys := unused.UnsortedList()
	sort.Strings(keys)
	for _, k := range keys {
		problems = append(problems, "granted but never used: "+k+": remove it from the +kubebuilder:rbac markers, or say in unusedGrants why the suite cannot use it")
	}
	return problems
}

// Leader election works with the Role and RoleBinding the bundle ships (OLM creates them in the
// install namespace as they are), and gives no access to Leases of any other namespace.
func TestLeaderElectionNeedsOnlyTheBundledRole(t *testing.T) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var leaseVerbs []string
	for _, file := range []string{"rbac.authorization.k8s.io_v1_role_etcd-autopilot-leader-election-role.yaml", "rbac.authorization.k8s.io_v1_rolebinding_etcd-autopilot-leader-election-rolebinding.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "bundle", "manifests", file))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		obj.SetNamespace(operatorNamespace)
		rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			if slices.Contains(rule["resources"].([]any), any("leases")) {
				for _, v := range rule["verbs"].([]any) {
					leaseVerbs = append(leaseVerbs, v.(string))
				}
			}
		}
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("create %s: %v", file, err)
		}
	}

	// The API server's authorizer learns of a new RoleBinding a moment later: wait for it, so that a
	// refusal below means the Role is wrong, not that it was read too early.
	eventually(t, "the bundled RoleBinding in effect", func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + operatorNamespace + ":" + operatorServiceAccount,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: operatorNamespace, Verb: "get", Group: "coordination.k8s.io", Resource: "leases",
			},
		}}
		if err := k8s.Create(ctx, sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not allowed yet: %s", sar.Status.Reason)
		}
		return nil
	})

	audit := newAPIAudit()
	cfg := audit.operatorConfig(testConfig)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionID: "leader-election-test", LeaderElectionNamespace: operatorNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- mgr.Start(mctx) }()
	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Error("not elected within 30s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("manager: %v", err)
	}
	audit.mu.Lock()
	if len(audit.forbidden) > 0 {
		t.Errorf("leader election was refused: %v", audit.forbidden)
	}
	for _, verb := range leaseVerbs {
		if !audit.used.Has("coordination.k8s.io/leases " + verb) {
			t.Errorf("the bundled Role grants %s on Leases, which leader election never used", verb)
		}
	}
	audit.mu.Unlock()

	operator, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "leader-election-test"}}
	if err := operator.Create(ctx, lease); !apierrors.IsForbidden(err) {
		t.Errorf("the operator created a Lease outside its namespace: err %v", err)
	}
}
