// Package prometheus carries this directory's monitoring objects into the manager binary: the
// operator creates them itself where the Prometheus Operator's API exists (internal/monitoring), so
// the bundle ships none and installs on clusters without it. `kubectl apply -k config/prometheus`
// renders the same objects for those who manage them themselves.
package prometheus

import "embed"

// Objects are the ServiceMonitors of the operator and of the etcd members, and the PrometheusRule,
// named and placed as kustomize would (namePrefix, the operator's namespace) by their reader.
//
//go:embed monitor.yaml etcd_monitor.yaml etcd_rules.yaml
var Objects embed.FS

// Files lists Objects in the order the operator applies them.
var Files = []string{"monitor.yaml", "etcd_monitor.yaml", "etcd_rules.yaml"}
