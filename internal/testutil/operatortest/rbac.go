package operatortest

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

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The controllers of a suite run as the operator's ServiceAccount, bound to nothing but the role
// controller-gen renders from the +kubebuilder:rbac markers (config/rbac/role.yaml): a call the role
// does not allow is answered Forbidden by the real API server, and the suite fails on it. Every
// request is also recorded, so a rule its suite never needed fails it too: each rule is checked by
// one suite, the etcdcluster one (whose tests take clusters through backups and schedules too)
// unless checkedBy names another, and unusedGrants says why no suite can exercise the rest.

// OperatorNamespace and OperatorServiceAccount are where the operator runs and as whom.
const (
	OperatorNamespace      = "etcd-autopilot-system"
	OperatorServiceAccount = "etcd-autopilot-controller-manager"
)

// unusedGrants are rules of role.yaml no envtest suite can exercise, with the reason; every other
// rule must be used by the suite that checks it (checkedHere). "group/resource verb", group empty
// for the core group.
var unusedGrants = map[string]string{
	// The API server checks these only when its OwnerReferencesPermissionEnforcement admission
	// plugin is on (OpenShift): setting blockOwnerDeletion on an owner reference needs update on the
	// owner's finalizers. envtest does not enable the plugin, so the grant is never consulted here.
	"etcd.autopilot.dev/etcdclusters/finalizers update":        "OwnerReferencesPermissionEnforcement",
	"etcd.autopilot.dev/etcdbackups/finalizers update":         "OwnerReferencesPermissionEnforcement",
	"etcd.autopilot.dev/etcdbackupschedules/finalizers update": "OwnerReferencesPermissionEnforcement",
	// No etcd answers in envtest (pods stay Pending), so no member pod of an earlier operator is
	// adopted (patch: its config-hash annotation), restarted, removed or replaced (pod and PVC
	// delete): internal/controller/etcdcluster/actions.go does these, and the e2e suite runs them
	// on a real cluster.
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

// checkedBy names the suite (the test package's directory) that must use a rule the etcdcluster
// suite does not reach.
var checkedBy = map[string]string{
	// The schedule creates its runs, deletes them past retention, and releases them (an owner
	// reference patched away) when deleted with snapshotDeletionPolicy Retain; the backup controller
	// and the schedule update a backup's finalizers.
	"etcd.autopilot.dev/etcdbackups create": "etcdbackupschedule",
	"etcd.autopilot.dev/etcdbackups delete": "etcdbackupschedule",
	"etcd.autopilot.dev/etcdbackups patch":  "etcdbackupschedule",
	"etcd.autopilot.dev/etcdbackups update": "etcdbackupschedule",
}

// checkedHere says whether suite must use rule.
func checkedHere(rule, suite string) bool {
	if by, ok := checkedBy[rule]; ok {
		return by == suite
	}
	return suite == "etcdcluster"
}

// Audit records what the operator's client does and what the API server refuses it.
type Audit struct {
	mu        sync.Mutex
	info      request.RequestInfoFactory
	used      sets.Set[string]
	forbidden []string
}

// NewAudit is an Audit that has seen no request.
func NewAudit() *Audit {
	return &Audit{
		info: request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")},
		used: sets.New[string](),
	}
}

// OperatorConfig is cfg acting as the operator's ServiceAccount, with every request audited.
func (a *Audit) OperatorConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", OperatorNamespace, OperatorServiceAccount),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + OperatorNamespace, "system:authenticated"},
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
func (a *Audit) key(req *http.Request) string {
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
func grantOperatorRole(ctx context.Context, admin client.Client, root string) (sets.Set[string], error) {
	granted := sets.New[string]()
	for _, file := range operatorRoles {
		raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", file))
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
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: OperatorNamespace, Name: OperatorServiceAccount}},
		}
		binding.Name = role.Name
		if err := admin.Create(ctx, binding); err != nil {
			return nil, fmt.Errorf("bind the operator's role %s: %w", role.Name, err)
		}
	}
	return granted, nil
}

// Forbidden are the calls the API server refused for want of a rule.
func (a *Audit) Forbidden() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.forbidden)
}

// Used says whether a call needed rule key, "group/resource verb".
func (a *Audit) Used(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used.Has(key)
}

// verdict says what is wrong with the role after suite: calls it refused, and — when the whole
// suite ran (no -run filter) — rules it checks that no call needed.
func (a *Audit) verdict(granted sets.Set[string], suite string) []string {
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
	for k := range unused {
		if _, cannot := unusedGrants[k]; cannot || !checkedHere(k, suite) {
			unused.Delete(k)
		}
	}
	keys := unused.UnsortedList()
	sort.Strings(keys)
	for _, k := range keys {
		problems = append(problems, "granted but never used: "+k+": remove it from the +kubebuilder:rbac markers, or say in unusedGrants why no suite can use it")
	}
	return problems
}
