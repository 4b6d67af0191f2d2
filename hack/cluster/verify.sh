#!/usr/bin/env bash
# hack/cluster/verify.sh [STATE_DIR] -- end-to-end checks of the cluster hack/cluster/up.sh started:
#  pods (busybox, the etcd image), ClusterIP/NodePort Services from pod and host, CoreDNS,
#  a 3-member etcd StatefulSet (headless Service, DNS peer URLs, local-path PVCs),
#  `etcdctl endpoint health --cluster` from the host via pod IPs, data surviving pod
#  deletion, plus security-context variants operators use (RuntimeDefault seccomp,
#  non-root, privileged, Guaranteed QoS, hostPort), and (verify-csi.sh) a csi-hostpath-expandable
#  volume grown online. Needs the etcd images:
#  hack/images/build.sh load etcd. Leaves namespace kc-demo behind (kubectl delete ns kc-demo).
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
STATE=$(cd "${1:-${CLUSTER_DIR:-$repo/.cluster}}" && pwd)
. "$STATE/env.sh"
. "$STATE/cluster.env"
NS=kc-demo
# shellcheck source=checks.sh
. "$here/checks.sh"

kubectl create ns $NS --dry-run=client -o yaml | kubectl apply -f - >/dev/null
cat <<'EOF' | sed "s/NS/$NS/g" | kubectl apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: bb, namespace: NS, labels: {app: bb}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: bb
    image: localhost/busybox:1.35.0
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && echo hello-from-bb > /www/index.html && httpd -f -p 8080 -h /www']
    ports: [{containerPort: 8080, hostPort: 18080}]
---
apiVersion: v1
kind: Service
metadata: {name: bb, namespace: NS}
spec:
  type: NodePort
  selector: {app: bb}
  ports: [{port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: etcd, namespace: NS}
spec:
  clusterIP: None
  publishNotReadyAddresses: true      # peers must resolve before they are Ready
  selector: {app: etcd}
  ports: [{name: client, port: 2379}, {name: peer, port: 2380}]
---
apiVersion: v1
kind: Service
metadata: {name: etcd-client, namespace: NS}
spec:
  selector: {app: etcd}
  ports: [{name: client, port: 2379}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: etcd, namespace: NS}
spec:
  serviceName: etcd
  replicas: 3
  podManagementPolicy: Parallel        # OrderedReady would deadlock: etcd-0 needs quorum to be Ready
  selector: {matchLabels: {app: etcd}}
  template:
    metadata: {labels: {app: etcd}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: etcd
        image: gcr.io/etcd-development/etcd:v3.6.16
        imagePullPolicy: IfNotPresent
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: POD_NS
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        command: [/usr/local/bin/etcd]
        args:
        - --name=$(POD_NAME)
        - --data-dir=/var/lib/etcd/data
        - --listen-peer-urls=http://0.0.0.0:2380
        - --listen-client-urls=http://0.0.0.0:2379
        - --listen-metrics-urls=http://0.0.0.0:2381
        # client URL = pod IP so `etcdctl --cluster` works from the host (no cluster DNS there)
        - --advertise-client-urls=http://$(POD_IP):2379
        - --initial-advertise-peer-urls=http://$(POD_NAME).etcd.$(POD_NS).svc.cluster.local:2380
        - --initial-cluster=etcd-0=http://etcd-0.etcd.NS.svc.cluster.local:2380,etcd-1=http://etcd-1.etcd.NS.svc.cluster.local:2380,etcd-2=http://etcd-2.etcd.NS.svc.cluster.local:2380
        - --initial-cluster-state=new
        - --initial-cluster-token=kc-demo
        ports: [{name: client, containerPort: 2379}, {name: peer, containerPort: 2380}]
        readinessProbe:
          httpGet: {path: /readyz, port: 2381}
          periodSeconds: 2
        volumeMounts: [{name: data, mountPath: /var/lib/etcd}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: local-path
      resources: {requests: {storage: 1Gi}}
EOF

# --- pods and services -------------------------------------------------------
check "busybox pod Running (hostPort 18080)" kubectl -n $NS wait pod/bb --for=condition=Ready --timeout=120s
BB_IP=$(kubectl -n $NS get pod bb -o jsonpath='{.status.podIP}')
SVC_IP=$(kubectl -n $NS get svc bb -o jsonpath='{.spec.clusterIP}')
check "ClusterIP $SVC_IP from host"          retry 10 sh -c "curl -sf --max-time 3 http://$SVC_IP/ | grep -q hello-from-bb"
check "NodePort $NODE_IP:30080 from host"    retry 10 sh -c "curl -sf --max-time 3 http://$NODE_IP:30080/ | grep -q hello-from-bb"
check "hostPort 18080 from host"             retry 10 sh -c "curl -sf --max-time 3 http://$NODE_IP:18080/ | grep -q hello-from-bb"
# NB: Debian 12's busybox-static `wget` segfaults (even on the host), so use nc.
check "Service by DNS name from a pod (hairpin to itself)" retry 10 kubectl -n $NS exec bb -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 bb.$NS.svc.cluster.local 80 | grep -q hello-from-bb"
check "pod DNS: kubernetes.default.svc.cluster.local -> 10.96.0.1" retry 10 sh -c "kubectl -n $NS exec bb -- nslookup kubernetes.default.svc.cluster.local | grep -q 10.96.0.1"
check "pod DNS via libc + search path: kube-dns.kube-system -> 10.96.0.10" retry 10 sh -c "kubectl -n $NS exec bb -- ping -c1 -W1 kube-dns.kube-system 2>&1 | grep -q '(10.96.0.10)'"
check "pod DNS: external name via forward (best effort; needs host resolver)" kubectl -n $NS exec bb -- nslookup proxy.golang.org

# --- etcd StatefulSet --------------------------------------------------------
check "etcd StatefulSet 3/3 Ready" kubectl -n $NS rollout status sts/etcd --timeout=300s
check "PVCs Bound (local-path)" sh -c "[ \$(kubectl -n $NS get pvc -o jsonpath='{.items[*].status.phase}' | tr ' ' '\n' | grep -c Bound) = 3 ]"
E0=$(kubectl -n $NS get pod etcd-0 -o jsonpath='{.status.podIP}')
check "etcdctl endpoint health --cluster (host -> pod IPs)" retry 30 etcdctl --endpoints=http://$E0:2379 endpoint health --cluster
etcdctl --endpoints=http://$E0:2379 member list -w table || true
etcdctl --endpoints=http://$E0:2379 endpoint health --cluster || true
check "headless DNS: etcd-1.etcd.$NS.svc.cluster.local from a pod" kubectl -n $NS exec bb -- nslookup etcd-1.etcd.$NS.svc.cluster.local
check "etcdctl inside pod via DNS names" kubectl -n $NS exec etcd-0 -- etcdctl --endpoints=http://etcd-2.etcd.$NS.svc.cluster.local:2379 endpoint status
CIP=$(kubectl -n $NS get svc etcd-client -o jsonpath='{.spec.clusterIP}')
check "etcd via ClusterIP $CIP from host" etcdctl --endpoints=http://$CIP:2379 put /kc/persist "survives-$(date +%s)"
VAL=$(etcdctl --endpoints=http://$CIP:2379 get /kc/persist --print-value-only)

# --- persistence -------------------------------------------------------------
PV0=$(kubectl get pv "$(kubectl -n $NS get pvc data-etcd-0 -o jsonpath='{.spec.volumeName}')" -o jsonpath='{.spec.hostPath.path}{.spec.local.path}')
check "PV of etcd-0 is a host directory under STATE ($PV0)" test -d "$PV0/data/member"
kubectl -n $NS delete pod etcd-0 etcd-1 etcd-2 --wait=true >/dev/null
check "etcd pods recreated after deleting all 3" kubectl -n $NS rollout status sts/etcd --timeout=300s
E0=$(kubectl -n $NS get pod etcd-0 -o jsonpath='{.status.podIP}')
check "data survived pod deletion ($VAL)" retry 30 sh -c "etcdctl --endpoints=http://$E0:2379 get /kc/persist --print-value-only | grep -qx '$VAL'"
check "cluster healthy again" retry 30 etcdctl --endpoints=http://$E0:2379 endpoint health --cluster

# --- security contexts operators commonly use --------------------------------
cat <<'EOF' | sed "s/NS/$NS/g" | kubectl apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: restricted, namespace: NS}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: c
    image: localhost/busybox:1.35.0
    imagePullPolicy: Never
    command: [sleep, "3600"]
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    resources: {limits: {cpu: 100m, memory: 32Mi}, requests: {cpu: 100m, memory: 32Mi}}   # Guaranteed QoS -> oom_score_adj -997 requested
---
apiVersion: v1
kind: Pod
metadata: {name: privileged, namespace: NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1.35.0
    imagePullPolicy: Never
    command: [sleep, "3600"]
    securityContext: {privileged: true}
EOF
check "restricted pod (non-root, RuntimeDefault seccomp, Guaranteed QoS) Running" kubectl -n $NS wait pod/restricted --for=condition=Ready --timeout=120s
check "seccomp filter active in restricted pod" sh -c "kubectl -n $NS exec restricted -- grep -E '^Seccomp:' /proc/self/status | grep -q 2"
check "privileged pod Running" kubectl -n $NS wait pod/privileged --for=condition=Ready --timeout=120s

# --- csi-hostpath-expandable: provision, mount, grow online -------------------
check "csi-hostpath-expandable volume provisioned, mounted and grown online (verify-csi.sh)" "$here/verify-csi.sh" "$STATE"

[ $FAILED = 0 ] && echo "ALL CHECKS PASSED" || { echo "SOME CHECKS FAILED"; exit 1; }
