#!/usr/bin/env bash
# make olm-install: OLM v0.42.0 on the local cluster, the objects of a real install: OLM's own Helm
# chart (deploy/chart of the module hack/tools/olm builds from) rendered offline with values.yaml
# into olm.yaml (hack/olm/render.sh), and its CRDs from the same module.
# The images (hack/images/olm.sh, set olm) must be loaded first; the Makefile does that. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
# shellcheck source=/dev/null
. "$CLUSTER_DIR/env.sh"
export PATH=$repo/bin:$PATH GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

chart=$(cd "$repo/hack/tools/olm" && go list -m -f '{{.Dir}}' github.com/operator-framework/operator-lifecycle-manager)/deploy/chart
opm=$("$repo/hack/images/build.sh" refs olm | awk '$1 ~ /\/opm:/ {print $2}')
[ -n "$opm" ] || { echo "olm-install: no opm image (hack/images/build.sh build olm)" >&2; exit 1; }

# CRDs first (the chart's OLMConfig object needs its CRD), established before the rest.
kubectl apply --server-side --force-conflicts -f "$chart/crds" >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f "$chart/crds" >/dev/null
sed "s|@OPM_IMAGE@|$opm|" "$here/olm.yaml" | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl -n olm rollout status deploy/olm-operator --timeout=180s
kubectl -n olm rollout status deploy/catalog-operator --timeout=180s
# olm-operator installs packageserver from its CSV, like any operator
for _ in $(seq 90); do
  [ "$(kubectl -n olm get csv packageserver -o jsonpath='{.status.phase}' 2>/dev/null)" = Succeeded ] && break
  sleep 2
done
kubectl -n olm wait csv/packageserver --for=jsonpath='{.status.phase}'=Succeeded --timeout=10s >/dev/null
kubectl wait apiservice/v1.packages.operators.coreos.com --for=condition=Available --timeout=120s >/dev/null

# The monitoring API, CRDs only (no Prometheus): the bundle ships ServiceMonitors and a PrometheusRule,
# and OLM fails an InstallPlan whose objects have no API on the cluster. OpenShift always has these.
crds=$(cd "$here/monitoring-crds" && go mod download -json github.com/prometheus-operator/prometheus-operator | jq -r .Dir)/example/prometheus-operator-crd
for k in servicemonitors podmonitors prometheusrules; do
  kubectl apply --server-side --force-conflicts -f "$crds/monitoring.coreos.com_$k.yaml" >/dev/null
done
echo "OLM v0.42.0 is running (namespaces olm, operators); monitoring.coreos.com CRDs installed"
