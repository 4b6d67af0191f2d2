#!/usr/bin/env bash
# make olmv1-install: OLM v1 (operator-controller and catalogd v1.5.1, built from their Go module)
# on the local cluster, from the release's own manifests (olmv1.yaml, hack/olmv1/render.sh), plus
# what a real cluster provides around it:
# - the serving certificates cert-manager would issue: a CA of our own (kept in the cluster
#   directory, so a re-run changes nothing), catalogd's and operator-controller's certificates in the
#   Secrets the release mounts, the CA injected into catalogd's webhook;
# - an image registry (crane's, in namespace olmv1-registry) standing in for the mirror of a
#   disconnected cluster, and a registries.conf drop-in (ConfigMap olmv1-registries) that sends
#   ghcr.io/etcd-autopilot/* there; hack/registry-push.sh pushes images into it. Its Service has a
#   fixed ClusterIP (REGISTRY_SVC_IP), which the nodes' containerd mirrors ghcr.io and gcr.io to
#   (hack/cluster/up.sh), so pods pull our images by digest from it too.
# No monitoring.coreos.com CRDs: the bundle needs none (the operator creates its monitoring objects
# when the API appears), and the e2e installs them itself once it has installed without them.
# The images (hack/images/olm.sh, set olmv1) must be loaded first; the Makefile does that. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
# shellcheck source=/dev/null
. "$CLUSTER_DIR/env.sh"
# shellcheck source=../images/images.sh
. "$repo/hack/images/images.sh"
export PATH=$repo/bin:$PATH
ns=olmv1-system
pki=$CLUSTER_DIR/olmv1-pki
mkdir -p "$pki"

# issue NAME DNS...: a P-256 serving certificate from the CA, for the names given
issue() {
  local name=$1; shift
  [ -s "$pki/$name.crt" ] && return 0
  local san; san=$(printf 'DNS:%s,' "$@"); san=${san%,}
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/$name.key" \
    -subj "/CN=$1" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 825 -sha256 \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\n' "$san") \
    -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr"
}
if [ ! -s "$pki/ca.crt" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/ca.key" -subj /CN=olmv1-ca \
    -days 3650 -sha256 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -out "$pki/ca.crt" 2>/dev/null
fi
issue catalogd localhost "catalogd-service.$ns.svc" "catalogd-service.$ns.svc.cluster.local"
issue operator-controller "operator-controller-service.$ns.svc" "operator-controller-service.$ns.svc.cluster.local"

# CRDs and the namespace first; the rest once its Secrets exist (no pod waits on a missing mount).
apply() { kubectl apply --server-side --force-conflicts -f - >/dev/null; }
tail -n +2 "$here/olmv1.yaml" | awk 'BEGIN {RS = "\n---\n"; ORS = "\n---\n"} /\nkind: (CustomResourceDefinition|Namespace)\n/' | apply
kubectl wait --for=condition=Established --timeout=60s crd/clustercatalogs.olm.operatorframework.io \
  crd/clusterextensions.olm.operatorframework.io >/dev/null
secret() { # NAME CERT
  kubectl -n $ns create secret generic "$1" --type=kubernetes.io/tls --from-file=tls.crt="$pki/$2.crt" \
    --from-file=tls.key="$pki/$2.key" --from-file=ca.crt="$pki/ca.crt" --dry-run=client -o yaml | apply
}
secret catalogd-service-cert-git-version catalogd
secret olmv1-cert operator-controller

# The registry and the drop-in that points our images at it (plain HTTP inside the cluster: a
# stand-in for a mirror, which would have TLS and its CA in the controllers' --pull-cas-dir).
# A ClusterIP cannot change: a Service from before it was fixed goes first.
ip=$(kubectl -n olmv1-registry get service registry -o jsonpath='{.spec.clusterIP}' 2>/dev/null || true)
[ -z "$ip" ] || [ "$ip" = "$REGISTRY_SVC_IP" ] || kubectl -n olmv1-registry delete service registry >/dev/null
apply <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: olmv1-registries, namespace: $ns}
data:
  etcd-autopilot-mirror.conf: |
    [[registry]]
    prefix = "ghcr.io/etcd-autopilot"
    location = "registry.olmv1-registry.svc:5000/etcd-autopilot"
    insecure = true
---
apiVersion: v1
kind: Namespace
metadata:
  name: olmv1-registry
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: registry, namespace: olmv1-registry}
spec:
  replicas: 1
  selector: {matchLabels: {app: registry}}
  template:
    metadata: {labels: {app: registry}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: registry
        image: $REGISTRY_IMAGE
        args: [--address=:5000, --disk=/var/lib/registry]
        ports: [{containerPort: 5000}]
        readinessProbe: {httpGet: {path: /v2/, port: 5000}, periodSeconds: 2}
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, readOnlyRootFilesystem: true}
        volumeMounts: [{name: data, mountPath: /var/lib/registry}]
      volumes: [{name: data, emptyDir: {}}]
---
apiVersion: v1
kind: Service
metadata: {name: registry, namespace: olmv1-registry}
spec:
  clusterIP: $REGISTRY_SVC_IP
  selector: {app: registry}
  ports: [{port: $REGISTRY_PORT, targetPort: 5000}]
YAML

tail -n +2 "$here/olmv1.yaml" | apply
ca=$(base64 -w0 < "$pki/ca.crt")
kubectl patch mutatingwebhookconfiguration catalogd-mutating-webhook-configuration --type=json \
  -p "[{\"op\": \"replace\", \"path\": \"/webhooks/0/clientConfig/caBundle\", \"value\": \"$ca\"}]" >/dev/null
kubectl -n olmv1-registry rollout status deploy/registry --timeout=120s
kubectl -n $ns rollout status deploy/catalogd-controller-manager --timeout=180s
kubectl -n $ns rollout status deploy/operator-controller-controller-manager --timeout=180s
echo "OLM v1 (operator-controller v1.5.1) is running in $ns; image registry in olmv1-registry"
