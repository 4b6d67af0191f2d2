#!/usr/bin/env bash
# The monitoring API, CRDs only (no Prometheus), for both OLMs (hack/olm/install.sh,
# hack/olmv1/install.sh): the bundle ships ServiceMonitors and a PrometheusRule, and neither OLM
# installs a bundle whose objects have no API on the cluster. OpenShift always has these.
# Needs KUBECONFIG (or the cluster's env.sh) and kubectl on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
crds=$(cd "$here" && GOTOOLCHAIN=local go mod download -json github.com/prometheus-operator/prometheus-operator | jq -r .Dir)/example/prometheus-operator-crd
for k in servicemonitors podmonitors prometheusrules; do
  kubectl apply --server-side --force-conflicts -f "$crds/monitoring.coreos.com_$k.yaml" >/dev/null
done
