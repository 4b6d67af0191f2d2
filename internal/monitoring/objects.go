// Package monitoring creates the operator's ServiceMonitors and PrometheusRules (config/prometheus)
// at run time, where and when the cluster serves the Prometheus Operator's API. The bundle cannot
// ship them: OLM refuses a bundle whose objects have no API on the cluster, and most clusters
// outside OpenShift have no Prometheus Operator.
package monitoring

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/etcd-autopilot/etcd-autopilot/config/prometheus"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// GroupVersion is the monitoring API the objects belong to.
const GroupVersion = "monitoring.coreos.com/v1"

// namePrefix is config/default's and the bundle's: the objects carry the names kustomize gives them,
// so a later `kubectl apply -k config/prometheus` updates them instead of adding a second set.
const namePrefix = "etcd-autopilot-"

// AnnotationRevision is the hash of what the operator last applied to an object: it applies again
// when the hash differs, and otherwise writes nothing. Only the operator sets it, so it also marks
// the objects the operator may delete.
const AnnotationRevision = "etcd.autopilot.dev/monitoring-revision"

// The shipped files the objects come from.
const (
	operatorMonitorFile = "monitor.yaml"
	membersMonitorFile  = "etcd_monitor.yaml"
	rulesFile           = "etcd_rules.yaml"
)

// MemberRuleGroup is the group of etcd_rules.yaml whose alerts read the members' own metrics, and
// so can be evaluated in the members' namespace; the other groups read the operator's metrics,
// which are scraped in the operator's namespace.
const MemberRuleGroup = "etcd-autopilot.etcd"

// MemberRulesName names the PrometheusRule that holds MemberRuleGroup in a cluster's namespace
// (per-namespace scope); in the operator's namespace etcd_rules.yaml keeps its own name.
const MemberRulesName = namePrefix + "etcd-member-rules"

// resourceOf the kinds in config/prometheus.
var resourceOf = map[string]string{"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}

// Resources are the API resources Desired's objects need, for discovery.
func Resources() []string { return []string{"servicemonitors", "prometheusrules"} }

// Object is one monitoring object and the resource it is written through.
type Object struct {
	Resource schema.GroupVersionResource
	*unstructured.Unstructured
}

// Desired builds the monitoring objects of an operator running in namespace, as config/prometheus
// holds them: the operator's ServiceMonitor, the members' (every namespace), the PrometheusRule.
// This is the cluster-wide scope, for a Prometheus that honours namespace selectors.
func Desired(namespace string) ([]Object, error) {
	out := make([]Object, 0, len(prometheus.Files))
	for _, file := range prometheus.Files {
		u, err := load(file)
		if err != nil {
			return nil, err
		}
		o, err := finish(u, namespace, nil)
		if err != nil {
			return nil, fmt.Errorf("config/prometheus/%s: %w", file, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// OperatorObjects are what stays in the operator's namespace in the per-namespace scope: the
// operator's ServiceMonitor and the PrometheusRule without MemberRuleGroup, whose alerts read the
// operator's metrics (scraped there).
func OperatorObjects(namespace string) ([]Object, error) {
	monitor, err := load(operatorMonitorFile)
	if err != nil {
		return nil, err
	}
	rules, err := load(rulesFile)
	if err != nil {
		return nil, err
	}
	if err := keepGroups(rules, func(name string) bool { return name != MemberRuleGroup }); err != nil {
		return nil, err
	}
	return finishAll(namespace, nil, monitor, rules)
}

// MemberObjects are what a namespace holding EtcdClusters gets in the per-namespace scope, owned by
// those clusters: etcd_monitor.yaml selecting that namespace's members only (no namespaceSelector
// means the monitor's own namespace, which is also all a namespace-bound Prometheus allows), and
// MemberRuleGroup as a PrometheusRule of its own.
func MemberObjects(namespace string, owners []metav1.OwnerReference) ([]Object, error) {
	monitor, err := load(membersMonitorFile)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(monitor.Object, "spec", "namespaceSelector")
	rules, err := load(rulesFile)
	if err != nil {
		return nil, err
	}
	rules.SetName(MemberRulesName)
	if err := keepGroups(rules, func(name string) bool { return name == MemberRuleGroup }); err != nil {
		return nil, err
	}
	return finishAll(namespace, owners, monitor, rules)
}

// load reads one file of config/prometheus, named as kustomize names it.
func load(file string) (*unstructured.Unstructured, error) {
	raw, err := fs.ReadFile(prometheus.Objects, file)
	if err != nil {
		return nil, fmt.Errorf("read config/prometheus/%s: %w", file, err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		return nil, fmt.Errorf("parse config/prometheus/%s: %w", file, err)
	}
	if u.GetAPIVersion() != GroupVersion || resourceOf[u.GetKind()] == "" {
		return nil, fmt.Errorf("config/prometheus/%s: %s %s is not a monitoring object this operator creates", file, u.GetAPIVersion(), u.GetKind())
	}
	u.SetName(namePrefix + u.GetName())
	return u, nil
}

// keepGroups drops the rule groups of a PrometheusRule whose name keep refuses; none left is an
// error, since it means etcd_rules.yaml and MemberRuleGroup no longer agree.
func keepGroups(rule *unstructured.Unstructured, keep func(name string) bool) error {
	groups, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if err != nil {
		return fmt.Errorf("PrometheusRule %s: %w", rule.GetName(), err)
	}
	kept := make([]any, 0, len(groups))
	for _, g := range groups {
		if m, ok := g.(map[string]any); ok && keep(fmt.Sprint(m["name"])) {
			kept = append(kept, g)
		}
	}
	if len(kept) == 0 {
		return fmt.Errorf("PrometheusRule %s: no rule group left (is %q still in etcd_rules.yaml?)", rule.GetName(), MemberRuleGroup)
	}
	return unstructured.SetNestedSlice(rule.Object, kept, "spec", "groups")
}

func finishAll(namespace string, owners []metav1.OwnerReference, objs ...*unstructured.Unstructured) ([]Object, error) {
	out := make([]Object, 0, len(objs))
	for _, u := range objs {
		o, err := finish(u, namespace, owners)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		out = append(out, o)
	}
	return out, nil
}

// finish places an object in namespace with its owners, marks it as the operator's and records its
// revision. The owners are part of the revision, so a cluster coming or going in the namespace
// re-applies the objects with the new owner list.
func finish(u *unstructured.Unstructured, namespace string, owners []metav1.OwnerReference) (Object, error) {
	u.SetNamespace(namespace)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[naming.LabelManagedBy] = naming.ManagedBy
	u.SetLabels(labels)
	hashed := map[string]any{"labels": labels, "spec": u.Object["spec"]}
	if owners != nil {
		u.SetOwnerReferences(owners)
		hashed["owners"] = owners
	}
	spec, err := json.Marshal(hashed)
	if err != nil {
		return Object{}, err
	}
	sum := sha256.Sum256(spec)
	u.SetAnnotations(map[string]string{AnnotationRevision: hex.EncodeToString(sum[:8])})
	gv, err := schema.ParseGroupVersion(GroupVersion)
	if err != nil {
		return Object{}, err
	}
	return Object{Resource: gv.WithResource(resourceOf[u.GetKind()]), Unstructured: u}, nil
}
