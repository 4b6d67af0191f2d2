#!/usr/bin/env bash
# make demo: the operator installed through OLM, as users get it (CatalogSource with our catalog image
# → OperatorGroup → Subscription → CSV Succeeded), then a 3-member sample EtcdCluster.
# Expects a running cluster with OLM and the images loaded (make cluster-up cluster-load olm-install
# catalog-load); the Makefile passes the catalog image (by digest) and the CSV name. Re-running is safe.
# Usage: hack/demo.sh CATALOG_IMAGE CSV
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
# shellcheck source=/dev/null
. "$CLUSTER_DIR/env.sh"
NS=${DEMO_NAMESPACE:-etcd-demo}

[ $# -eq 2 ] || { sed -n '2,6p' "$0" | sed 's/^# //' >&2; exit 2; }
"$repo/hack/olm/subscribe.sh" "$NS" "$1" "$2"
kubectl -n "$NS" get subscription,csv
kubectl -n "$NS" apply -f "$repo/config/samples/etcd_v1alpha1_etcdcluster.yaml" >/dev/null
echo "waiting for EtcdCluster/example to become Available..."
kubectl -n "$NS" wait etcdcluster/example --for=condition=Available --timeout=300s
kubectl -n "$NS" wait etcdcluster/example --for=jsonpath='{.status.readyReplicas}'=3 --timeout=300s >/dev/null
kubectl -n "$NS" get etcd,pods -o wide

secret=$(kubectl -n "$NS" get etcdcluster example -o jsonpath='{.status.endpoints.clientSecret}')
d=$(mktemp -d)
for k in ca.crt tls.crt tls.key; do
  kubectl -n "$NS" get secret "$secret" -o jsonpath="{.data.${k//./\\.}}" | base64 -d > "$d/$k"
done
# The server certificates name localhost, so a port-forward is verified like the in-cluster Service name.
port=${DEMO_PORT:-23790}
kubectl -n "$NS" port-forward svc/example-client "$port:2379" >/dev/null 2>&1 &
pf=$!; trap 'kill $pf 2>/dev/null; rm -rf "$d"' EXIT
ETCDCTL="etcdctl --endpoints=https://localhost:$port --cacert=$d/ca.crt --cert=$d/tls.crt --key=$d/tls.key"
for _ in $(seq 30); do $ETCDCTL endpoint health >/dev/null 2>&1 && break; sleep 1; done
$ETCDCTL put /demo/hello world >/dev/null
$ETCDCTL get /demo/hello
$ETCDCTL member list -w table
cat <<MSG

The cluster answers over TLS with the client certificate the operator published (Secret $NS/$secret).
From this host:
  source $CLUSTER_DIR/env.sh
  kubectl -n $NS port-forward svc/example-client $port:2379 &
  etcdctl --endpoints=https://localhost:$port --cacert=ca.crt --cert=tls.crt --key=tls.key get /demo/hello
  (the three files are the keys of Secret $NS/$secret)
In the cluster, clients use https://example-client.$NS.svc:2379 with that Secret mounted.
MSG
