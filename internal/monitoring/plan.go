package monitoring

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Scope is where the members' monitoring objects go.
type Scope int

const (
	// ScopeAuto is ScopePerNamespace on OpenShift and ScopeClusterWide elsewhere.
	ScopeAuto Scope = iota
	// ScopeClusterWide: everything in the operator's namespace, the members' ServiceMonitor
	// selecting every namespace. Right for a Prometheus that honours namespace selectors.
	ScopeClusterWide
	// ScopePerNamespace: the members' ServiceMonitor and alerts in each namespace that holds an
	// EtcdCluster. OpenShift's user-workload monitoring ignores namespace selectors (a monitor
	// selects only its own namespace) and evaluates a PrometheusRule only on its namespace's series,
	// so members elsewhere would go unscraped and unalerted.
	ScopePerNamespace
)

func (s Scope) String() string {
	return [...]string{"auto", "cluster-wide", "per-namespace"}[s]
}

// ParseSetting reads MONITORING: off (create nothing), auto or empty (the default; "on" too, which
// earlier releases took as anything but off), cluster-wide or per-namespace (force a scope, e.g. for
// a Prometheus that ignores namespace selectors outside OpenShift). Anything else is refused rather
// than guessed.
func ParseSetting(setting string) (scope Scope, enabled bool, err error) {
	switch strings.TrimSpace(setting) {
	case "off":
		return ScopeAuto, false, nil
	case "", "auto", "on":
		return ScopeAuto, true, nil
	case "cluster-wide":
		return ScopeClusterWide, true, nil
	case "per-namespace":
		return ScopePerNamespace, true, nil
	default:
		return ScopeAuto, false, fmt.Errorf("MONITORING=%q: want auto, cluster-wide, per-namespace or off", setting)
	}
}

// Plan is every monitoring object the operator keeps, by namespace. owners holds, for each namespace
// with EtcdClusters, those clusters as owner references; only ScopePerNamespace reads it.
func Plan(scope Scope, operatorNamespace string, owners map[string][]metav1.OwnerReference) (map[string][]Object, error) {
	switch scope {
	case ScopeClusterWide:
		objs, err := Desired(operatorNamespace)
		return map[string][]Object{operatorNamespace: objs}, err
	case ScopePerNamespace:
	default:
		return nil, fmt.Errorf("plan monitoring objects: scope %v not resolved", scope)
	}
	objs, err := OperatorObjects(operatorNamespace)
	if err != nil {
		return nil, err
	}
	plan := map[string][]Object{operatorNamespace: objs}
	for ns, refs := range owners {
		members, err := MemberObjects(ns, refs)
		if err != nil {
			return nil, err
		}
		plan[ns] = append(plan[ns], members...)
	}
	return plan, nil
}

// Ref names one object of the API.
type Ref struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
}

func (r Ref) String() string { return r.Resource.Resource + " " + r.Namespace + "/" + r.Name }

// Stale lists the member objects the operator may have made in namespaces that plan does not keep:
// the members' ServiceMonitor and rules in a namespace whose last cluster went, or the cluster-wide
// members' ServiceMonitor in the operator's namespace after a move to ScopePerNamespace. Only the
// members' objects ever move; the operator's own are in its namespace in every scope.
func Stale(plan map[string][]Object, namespaces []string) ([]Ref, error) {
	candidates, err := MemberObjects("", nil)
	if err != nil {
		return nil, err
	}
	var out []Ref
	for _, ns := range namespaces {
		for _, c := range candidates {
			kept := slices.ContainsFunc(plan[ns], func(o Object) bool { return o.Resource == c.Resource && o.GetName() == c.GetName() })
			if !kept {
				out = append(out, Ref{Resource: c.Resource, Namespace: ns, Name: c.GetName()})
			}
		}
	}
	return out, nil
}

// Owners turns EtcdClusters (namespace, name, UID) into owner references by namespace, in name
// order so that the objects' revisions do not change with list order.
func Owners(apiVersion, kind string, clusters []metav1.Object) map[string][]metav1.OwnerReference {
	out := map[string][]metav1.OwnerReference{}
	for _, c := range clusters {
		out[c.GetNamespace()] = append(out[c.GetNamespace()], metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: c.GetName(), UID: c.GetUID()})
	}
	for _, refs := range out {
		slices.SortFunc(refs, func(a, b metav1.OwnerReference) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}
