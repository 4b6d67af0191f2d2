#!/usr/bin/env bash
# hack/cluster/verify-csi.sh [STATE_DIR] -- checks that the csi-hostpath-expandable StorageClass of
# hack/cluster/up.sh provisions, mounts and grows a volume online: a claim binds, a pod writes to it
# (the data lands in the driver's directory under STATE), the claim is raised from 64Mi to 128Mi while
# the pod runs, its capacity reaches 128Mi with no FileSystemResizePending left and the pod neither
# restarted nor lost the data; deleting the claim deletes the volume. Run by verify.sh; alone it takes
# ≈ 15 s. Cleans up after itself (namespace kc-csi).
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
STATE=$(cd "${1:-${CLUSTER_DIR:-$repo/.cluster}}" && pwd)
. "$STATE/env.sh"
# shellcheck source=../images/images.sh
. "$repo/hack/images/images.sh"
NS=kc-csi
# shellcheck source=checks.sh
. "$here/checks.sh"
pvc() { kubectl -n $NS get pvc data -o jsonpath="$1"; }

kubectl delete ns $NS --ignore-not-found --wait=true >/dev/null
kubectl create ns $NS >/dev/null
cat <<EOF | kubectl apply -f - >/dev/null
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: $NS}
spec:
  storageClassName: csi-hostpath-expandable
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: user, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true, runAsUser: 65532}
  containers:
  - name: c
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'echo kept > /data/file && sleep 3600']
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
EOF
check "pod with a csi-hostpath-expandable claim Running" kubectl -n $NS wait pod/user --for=condition=Ready --timeout=120s
check "claim Bound at 64Mi" sh -c "[ \"\$(kubectl -n $NS get pvc data -o jsonpath='{.status.phase} {.status.capacity.storage}')\" = 'Bound 64Mi' ]"
HANDLE=$(kubectl get pv "$(pvc '{.spec.volumeName}')" -o jsonpath='{.spec.csi.volumeHandle}')
check "data in the driver's volume under STATE ($HANDLE)" retry 10 grep -qx kept "$STATE/csi-hostpath/volumes/$HANDLE/file"
UID0=$(kubectl -n $NS get pod user -o jsonpath='{.metadata.uid}')
kubectl -n $NS patch pvc data --type=merge -p '{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}' >/dev/null
grown() { [ "$(pvc '{.status.capacity.storage} {.status.conditions[*].type}')" = "128Mi " ]; }
check "claim grown online to 128Mi, no FileSystemResizePending left" retry 90 grown
check "the pod did not restart and kept its data" sh -c "[ \"\$(kubectl -n $NS get pod user -o jsonpath='{.metadata.uid} {.status.containerStatuses[0].restartCount}')\" = '$UID0 0' ] &&
  kubectl -n $NS exec user -- grep -qx kept /data/file"
kubectl delete ns $NS --wait=true >/dev/null
check "volume deleted with its claim" retry 30 test ! -e "$STATE/csi-hostpath/volumes/$HANDLE"

[ $FAILED = 0 ] && echo "CSI CHECKS PASSED" || { echo "CSI CHECKS FAILED"; exit 1; }
