module hacktools/monitoring-crds

// Only a source of the Prometheus Operator's CRDs (example/prometheus-operator-crd in its module
// zip), which OLM needs before it installs a bundle that ships ServiceMonitors or PrometheusRules.

go 1.25

require github.com/prometheus-operator/prometheus-operator v0.86.1
