#!/usr/bin/env bash
# hack/olm/subscribe.sh NAMESPACE CATALOG_IMAGE CSV: installs the operator the way users do, through
# OLM (make olm-install): the CatalogSource etcd-autopilot in olm serving CATALOG_IMAGE (a digest
# reference: OLM pulls tag references), an OperatorGroup targeting NAMESPACE only (OwnNamespace) and a
# Subscription to the stable channel; waits until CSV is Succeeded. Idempotent.
set -euo pipefail
[ $# -eq 3 ] || { sed -n '2,5p' "$0" | sed 's/^# //' >&2; exit 2; }
ns=$1 image=$2 csv=$3
kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: etcd-autopilot, namespace: olm}
spec:
  sourceType: grpc
  image: $image
  displayName: etcd-autopilot
  publisher: etcd-autopilot
  grpcPodConfig: {securityContextConfig: restricted}
YAML
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: etcd-autopilot, namespace: $ns}
spec:
  targetNamespaces: [$ns]
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: etcd-autopilot, namespace: $ns}
spec:
  channel: stable
  name: etcd-autopilot
  source: etcd-autopilot
  sourceNamespace: olm
  installPlanApproval: Automatic
YAML
echo "waiting for CSV $ns/$csv to succeed..."
for _ in $(seq 150); do
  phase=$(kubectl -n "$ns" get csv "$csv" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [ "$phase" = Succeeded ] && break
  [ "$phase" = Failed ] && { kubectl -n "$ns" get csv "$csv" -o jsonpath='{.status.message}' >&2; exit 1; }
  sleep 2
done
kubectl -n "$ns" wait csv/"$csv" --for=jsonpath='{.status.phase}'=Succeeded --timeout=5s
