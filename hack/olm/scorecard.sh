#!/usr/bin/env bash
# make scorecard: operator-sdk scorecard on bundle/ in the local cluster: the basic and olm suites
# (static checks, operator-sdk's scorecard-test image) and our tests of real behaviour (scorecard/),
# against the operator installed through OLM in a scratch namespace, deleted afterwards.
# Usage: hack/olm/scorecard.sh CATALOG_IMAGE CSV   (the Makefile passes both)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
# shellcheck source=/dev/null
. "$CLUSTER_DIR/env.sh"
export PATH=$repo/bin:$PATH
# shellcheck source=../images/olm.sh
. "$repo/hack/images/olm.sh"
NS=${SCORECARD_NAMESPACE:-etcd-autopilot-scorecard}

cleanup() {
  kubectl -n "$NS" delete subscription etcd-autopilot --ignore-not-found >/dev/null
  kubectl -n "$NS" delete csv "$2" --ignore-not-found >/dev/null
  # operands first, while no finalizer can block: the operator is gone with its CSV
  kubectl -n "$NS" patch etcdcluster --all --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  kubectl delete namespace "$NS" --ignore-not-found --wait=false >/dev/null
}
trap 'cleanup "$@"' EXIT
"$here/subscribe.sh" "$NS" "$1" "$2"
kubectl -n "$NS" apply -f "$repo/scorecard/rbac.yaml" >/dev/null
start=$(date +%s)
operator-sdk scorecard "$repo/bundle" --namespace "$NS" --service-account etcd-autopilot-scorecard \
  --pod-security restricted --untar-image "$SCORECARD_UNTAR_IMAGE" --wait-time 900s --output text
echo "scorecard passed in $(( $(date +%s) - start ))s"
