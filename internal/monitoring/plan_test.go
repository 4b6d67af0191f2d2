package monitoring_test

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoring"
)

const operatorNS = "operators"

func owner(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "etcd.autopilot.dev/v1alpha1", Kind: "EtcdCluster", Name: name, UID: types.UID("uid-" + name)}
}

// find returns the object of plan's namespace with kind and name, or nil.
func find(objs []monitoring.Object, kind, name string) *monitoring.Object {
	for i := range objs {
		if objs[i].GetKind() == kind && objs[i].GetName() == name {
			return &objs[i]
		}
	}
	return nil
}

func names(objs []monitoring.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

// Which objects go to which namespace: cluster-wide, all three shipped objects in the operator's
// namespace whatever the clusters; per namespace, the operator's objects stay there and every
// namespace with clusters (the operator's own included) gets the members' monitor and rules.
func TestPlan(t *testing.T) {
	owners := map[string][]metav1.OwnerReference{"apps": {owner("a")}, "db": {owner("b"), owner("c")}, operatorNS: {owner("d")}}
	shipped := []string{"PrometheusRule/etcd-autopilot-etcd-rules", "ServiceMonitor/etcd-autopilot-controller-manager-metrics-monitor", "ServiceMonitor/etcd-autopilot-etcd-members"}
	members := []string{"PrometheusRule/etcd-autopilot-etcd-member-rules", "ServiceMonitor/etcd-autopilot-etcd-members"}
	operator := []string{"PrometheusRule/etcd-autopilot-etcd-rules", "ServiceMonitor/etcd-autopilot-controller-manager-metrics-monitor"}
	for _, tc := range []struct {
		name   string
		scope  monitoring.Scope
		owners map[string][]metav1.OwnerReference
		want   map[string][]string
	}{
		{"cluster-wide, no clusters", monitoring.ScopeClusterWide, nil, map[string][]string{operatorNS: shipped}},
		{"cluster-wide ignores the clusters", monitoring.ScopeClusterWide, owners, map[string][]string{operatorNS: shipped}},
		{"per namespace, no clusters", monitoring.ScopePerNamespace, nil, map[string][]string{operatorNS: operator}},
		{"per namespace", monitoring.ScopePerNamespace, owners, map[string][]string{
			operatorNS: {"PrometheusRule/etcd-autopilot-etcd-member-rules", "PrometheusRule/etcd-autopilot-etcd-rules", "ServiceMonitor/etcd-autopilot-controller-manager-metrics-monitor", "ServiceMonitor/etcd-autopilot-etcd-members"},
			"apps":     members, "db": members}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := monitoring.Plan(tc.scope, operatorNS, tc.owners)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for ns, objs := range plan {
				got[ns] = names(objs)
				for _, o := range objs {
					if o.GetNamespace() != ns {
						t.Errorf("%s/%s planned in %s has namespace %q", o.GetKind(), o.GetName(), ns, o.GetNamespace())
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan %v\nwant %v", got, tc.want)
			}
			for ns, objs := range plan {
				for _, o := range objs {
					if o.GetKind() == "ServiceMonitor" && o.GetName() == "etcd-autopilot-etcd-members" && ns != operatorNS || o.GetName() == monitoring.MemberRulesName {
						if refs := o.GetOwnerReferences(); !reflect.DeepEqual(refs, tc.owners[ns]) {
							t.Errorf("%s/%s in %s owned by %v, want the namespace's clusters %v", o.GetKind(), o.GetName(), ns, refs, tc.owners[ns])
						}
					}
				}
			}
		})
	}
	if _, err := monitoring.Plan(monitoring.ScopeAuto, operatorNS, nil); err == nil {
		t.Error("Plan accepted an unresolved scope")
	}
}

// The members' monitor of a namespace is the shipped one (same selector, endpoints and
// relabelings) minus the namespace selector, so it selects the members of its own namespace only.
func TestMemberMonitorIsTheShippedOneInItsNamespace(t *testing.T) {
	shipped, err := monitoring.Desired(operatorNS)
	if err != nil {
		t.Fatal(err)
	}
	all := find(shipped, "ServiceMonitor", "etcd-autopilot-etcd-members")
	if any, _, _ := unstructured.NestedBool(all.Object, "spec", "namespaceSelector", "any"); !any {
		t.Fatal("the shipped members' monitor no longer selects every namespace; this test compares against it")
	}
	objs, err := monitoring.MemberObjects("apps", []metav1.OwnerReference{owner("a")})
	if err != nil {
		t.Fatal(err)
	}
	mine := find(objs, "ServiceMonitor", "etcd-autopilot-etcd-members")
	if mine == nil {
		t.Fatalf("no members' monitor in %v", names(objs))
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(mine.Object, "spec", "namespaceSelector"); found {
		t.Error("the namespace's members' monitor keeps a namespace selector")
	}
	for _, field := range []string{"selector", "endpoints"} {
		if !reflect.DeepEqual(mine.Object["spec"].(map[string]any)[field], all.Object["spec"].(map[string]any)[field]) {
			t.Errorf("spec.%s differs from etcd_monitor.yaml's", field)
		}
	}
	if mine.GetLabels()["app.kubernetes.io/managed-by"] != "etcd-autopilot" || mine.GetAnnotations()[monitoring.AnnotationRevision] == "" {
		t.Errorf("not marked as the operator's: labels %v, annotations %v", mine.GetLabels(), mine.GetAnnotations())
	}
}

// alerts lists "group/alert: expr" of a PrometheusRule.
func alerts(t *testing.T, o *monitoring.Object) map[string]string {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(o.Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range groups {
		group := g.(map[string]any)
		for _, r := range group["rules"].([]any) {
			rule := r.(map[string]any)
			out[fmt.Sprintf("%s/%s/%d", group["name"], rule["alert"], len(out))] = fmt.Sprint(rule["expr"])
		}
	}
	return out
}

// etcd_rules.yaml is split, not copied: each of its alerts lands in exactly one of the two
// PrometheusRules. The operator's namespace keeps only alerts that read the operator's metrics
// (etcd_autopilot_*), which are scraped there; every alert that reads etcd's metrics alone goes to
// the members' namespaces, where a namespace-bound ruler sees their series. EtcdMembersDown also
// reads etcd_autopilot_member_healthy, but its scrape half (up == 0) works in the members' namespace
// whether or not the operator's series reach it there.
func TestRulesSplitBetweenOperatorAndMembers(t *testing.T) {
	shipped, err := monitoring.Desired(operatorNS)
	if err != nil {
		t.Fatal(err)
	}
	opObjs, err := monitoring.OperatorObjects(operatorNS)
	if err != nil {
		t.Fatal(err)
	}
	memberObjs, err := monitoring.MemberObjects("apps", nil)
	if err != nil {
		t.Fatal(err)
	}
	all := alerts(t, find(shipped, "PrometheusRule", "etcd-autopilot-etcd-rules"))
	op := alerts(t, find(opObjs, "PrometheusRule", "etcd-autopilot-etcd-rules"))
	members := alerts(t, find(memberObjs, "PrometheusRule", monitoring.MemberRulesName))
	if len(op) == 0 || len(members) == 0 || len(op)+len(members) != len(all) {
		t.Fatalf("%d operator and %d member alerts, from %d shipped", len(op), len(members), len(all))
	}
	allExprs := slices.Sorted(maps.Values(all))
	memberExprs := slices.Collect(maps.Values(members))
	var split []string
	for _, e := range op {
		split = append(split, e)
		if !strings.Contains(e, "etcd_autopilot_") {
			t.Errorf("the operator's namespace keeps an alert on etcd's metrics alone: %s", e)
		}
	}
	for _, e := range members {
		split = append(split, e)
	}
	sort.Strings(split)
	if !reflect.DeepEqual(split, allExprs) {
		t.Error("the two rules together are not etcd_rules.yaml's alerts")
	}
	for name, e := range all {
		if !strings.Contains(e, "etcd_autopilot_") && !slices.Contains(memberExprs, e) {
			t.Errorf("%s reads etcd's metrics alone but is not in the members' rules", name)
		}
	}
}

// What is deleted where: the members' objects of a namespace the plan no longer holds, and in the
// operator's namespace whichever of them the scope does not keep there; never the operator's own.
func TestStale(t *testing.T) {
	wide, err := monitoring.Plan(monitoring.ScopeClusterWide, operatorNS, nil)
	if err != nil {
		t.Fatal(err)
	}
	perNS, err := monitoring.Plan(monitoring.ScopePerNamespace, operatorNS, map[string][]metav1.OwnerReference{"apps": {owner("a")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		plan       map[string][]monitoring.Object
		namespaces []string
		want       []string
	}{
		{"cluster-wide: a leftover members' rule in the operator's namespace", wide, []string{operatorNS},
			[]string{"prometheusrules operators/etcd-autopilot-etcd-member-rules"}},
		{"cluster-wide: a namespace that had clusters in the per-namespace scope", wide, []string{operatorNS, "apps"},
			[]string{"prometheusrules operators/etcd-autopilot-etcd-member-rules", "servicemonitors apps/etcd-autopilot-etcd-members", "prometheusrules apps/etcd-autopilot-etcd-member-rules"}},
		{"per namespace: the operator's namespace without clusters, a namespace whose clusters went", perNS, []string{operatorNS, "apps", "gone"},
			[]string{"servicemonitors operators/etcd-autopilot-etcd-members", "prometheusrules operators/etcd-autopilot-etcd-member-rules", "servicemonitors gone/etcd-autopilot-etcd-members", "prometheusrules gone/etcd-autopilot-etcd-member-rules"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, err := monitoring.Stale(tc.plan, tc.namespaces)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range refs {
				got = append(got, r.String())
			}
			sort.Strings(got)
			sort.Strings(tc.want)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("stale %v\nwant %v", got, tc.want)
			}
		})
	}
}

// A namespace's owners are its clusters in name order, so a list in another order changes no
// revision; a cluster more or less does.
func TestOwnersAndRevision(t *testing.T) {
	mk := func(ns, name string) metav1.Object {
		return &metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}
	}
	got := monitoring.Owners("etcd.autopilot.dev/v1alpha1", "EtcdCluster", []metav1.Object{mk("db", "c"), mk("apps", "a"), mk("db", "b")})
	want := map[string][]metav1.OwnerReference{"apps": {owner("a")}, "db": {owner("b"), owner("c")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("owners %v, want %v", got, want)
	}
	revision := func(owners ...metav1.OwnerReference) string {
		objs, err := monitoring.MemberObjects("db", owners)
		if err != nil {
			t.Fatal(err)
		}
		return objs[0].GetAnnotations()[monitoring.AnnotationRevision]
	}
	if revision(owner("b"), owner("c")) == revision(owner("b")) {
		t.Error("the revision does not change with the owners")
	}
	if first := revision(owner("b")); first != revision(owner("b")) {
		t.Error("the revision is not stable")
	}
}

func TestParseSetting(t *testing.T) {
	for _, tc := range []struct {
		setting string
		scope   monitoring.Scope
		enabled bool
		err     bool
	}{
		{"", monitoring.ScopeAuto, true, false},
		{"auto", monitoring.ScopeAuto, true, false},
		{" per-namespace ", monitoring.ScopePerNamespace, true, false},
		{"cluster-wide", monitoring.ScopeClusterWide, true, false},
		{"off", monitoring.ScopeAuto, false, false},
		{"on", monitoring.ScopeAuto, true, false},
		{"yes", monitoring.ScopeAuto, false, true},
	} {
		scope, enabled, err := monitoring.ParseSetting(tc.setting)
		if scope != tc.scope || enabled != tc.enabled || (err != nil) != tc.err {
			t.Errorf("MONITORING=%q: %v, %v, %v; want %v, %v, error %v", tc.setting, scope, enabled, err, tc.scope, tc.enabled, tc.err)
		}
	}
}
