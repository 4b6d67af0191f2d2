#!/usr/bin/env bash
# The monitoring API, CRDs only (no Prometheus): the OLM e2e suites (test/framework
# InstallMonitoringAPI) install them after installing the bundle without them, to see the operator
# create its ServiceMonitors and PrometheusRule when the API appears. OpenShift always has these.
# Needs KUBECONFIG (or the cluster's env.sh) and kubectl on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
crds=$(cd "$here" && GOTOOLCHAIN=local go mod download -json github.com/prometheus-operator/prometheus-operator | jq -r .Dir)/example/prometheus-operator-crd
for k in servicemonitors podmonitors prometheusrules; do
  kubectl apply --server-side --force-conflicts -f "$crds/monitoring.coreos.com_$k.yaml" >/dev/null
done
