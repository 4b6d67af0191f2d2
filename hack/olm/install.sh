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

apply_olm() { sed "s|@OPM_IMAGE@|$opm|" "$here/olm.yaml" | kubectl apply --server-side --force-conflicts -f - >/dev/null; }

# CRDs first (the chart's OLMConfig object needs its CRD), established before the rest.
kubectl apply --server-side --force-conflicts -f "$chart/crds" >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f "$chart/crds" >/dev/null
apply_olm
kubectl -n olm rollout status deploy/olm-operator --timeout=180s
kubectl -n olm rollout status deploy/catalog-operator --timeout=180s
# olm-operator installs packageserver from its CSV, like any operator. On a loaded machine (the CI runs
# this beside the unit lane) a CSV can fail its install (a probe timing out marks it Failed) and OLM's own
# retry of a failed CSV is slow. It also stayed at "InstallWaiting: apiServices not installed" for good
# when kube-apiserver's aggregator reached packageserver's new Service before kube-proxy had programmed
# it (up.sh's KC-GUARD now rejects such a connection, so the aggregator retries). A fresh-clone CI's OLM
# suite failed before its first test, most likely here (its log did not say). So the wait shows each
# phase it passes and, while the CSV has not succeeded, re-creates it every 60 s (a new Service, new
# connections), the third time with olm-operator restarted too (its caches rebuilt), and prints what OLM
# says before giving up.
csv_phase() { kubectl -n olm get csv packageserver -o jsonpath='{.status.phase} {.status.reason}: {.status.message}' 2>/dev/null; }
packageserver_diagnostics() {
  echo "olm-install: packageserver did not succeed; what OLM reports:" >&2
  kubectl -n olm get csv,deploy,pods -o wide >&2 || true
  kubectl get apiservice v1.packages.operators.coreos.com -o jsonpath='{.status.conditions}{"\n"}' >&2 || true
  kubectl -n olm get csv packageserver -o jsonpath='{range .status.conditions[*]}{.lastTransitionTime} {.phase} {.reason}: {.message}{"\n"}{end}' >&2 || true
  kubectl -n olm get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 30 >&2 || true
  kubectl -n olm logs deploy/olm-operator --tail=40 >&2 || true
}
wait_packageserver() { # seconds
  local deadline=$(( $(date +%s) + $1 )) seen="" now
  while [ "$(date +%s)" -lt "$deadline" ]; do
    now=$(csv_phase)
    [ "$now" = "$seen" ] || { echo "olm-install: packageserver ${now:-not created yet}"; seen=$now; }
    case $now in Succeeded*) return 0 ;; esac
    sleep 2
  done
  return 1
}
attempt=1
until wait_packageserver 60; do
  [ "$attempt" -lt 4 ] || { packageserver_diagnostics; exit 1; }
  attempt=$((attempt + 1))
  echo "olm-install: packageserver not installed after 60 s; re-creating its CSV (attempt $attempt of 4)" >&2
  kubectl -n olm delete csv packageserver --wait=true --timeout=60s >/dev/null || true
  if [ "$attempt" -eq 3 ]; then
    kubectl -n olm rollout restart deploy/olm-operator >/dev/null
    kubectl -n olm rollout status deploy/olm-operator --timeout=180s
  fi
  apply_olm
done
kubectl wait apiservice/v1.packages.operators.coreos.com --for=condition=Available --timeout=120s >/dev/null \
  || { packageserver_diagnostics; exit 1; }

# No monitoring.coreos.com CRDs: the bundle needs none (the operator creates its monitoring objects
# when the API appears), and the e2e installs them itself once it has installed without them.
echo "OLM v0.42.0 is running (namespaces olm, operators)"
