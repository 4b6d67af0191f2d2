// Package monitoring creates the operator's ServiceMonitors and PrometheusRule (config/prometheus)
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
// when the hash differs, and otherwise writes nothing.
const AnnotationRevision = "etcd.autopilot.dev/monitoring-revision"

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
func Desired(namespace string) ([]Object, error) {
	gv, err := schema.ParseGroupVersion(GroupVersion)
	if err != nil {
		return nil, err
	}
	out := make([]Object, 0, len(prometheus.Files))
	for _, file := range prometheus.Files {
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
		u.SetNamespace(namespace)
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[naming.LabelManagedBy] = naming.ManagedBy
		u.SetLabels(labels)
		spec, err := json.Marshal(map[string]any{"labels": labels, "spec": u.Object["spec"]})
		if err != nil {
			return nil, fmt.Errorf("config/prometheus/%s: %w", file, err)
		}
		sum := sha256.Sum256(spec)
		u.SetAnnotations(map[string]string{AnnotationRevision: hex.EncodeToString(sum[:8])})
		out = append(out, Object{Resource: gv.WithResource(resourceOf[u.GetKind()]), Unstructured: u})
	}
	return out, nil
}
