#!/usr/bin/env bash
# hack/cluster/up.sh [STATE_DIR] -- start a real single-node Kubernetes cluster on this host
# (adapted from shared/local-cluster's proven recipe): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy (iptables) as host
# processes, Debian's containerd + runc, a CNI bridge, CoreDNS behind kube-dns 10.96.0.10,
# rancher local-path-provisioner as the default StorageClass, csi-hostpath-expandable (a CSI
# driver that grows volumes online: hack/tools/csi) as a second one, and netpol-enforcer (our
# own, hack/tools/netpol) enforcing NetworkPolicy ingress rules with iptables.
#
# Binaries come from the project's pinned tools (hack/tools/build.sh, cached outside the
# tree and linked into bin/); images are built without a daemon by hack/images/build.sh.
# Missing Debian packages are apt-installed. Idempotent: re-running skips what is already
# generated or running. Stop with hack/cluster/down.sh [STATE_DIR] [--purge].
#
# STATE_DIR: argument, else $CLUSTER_DIR, else <repo>/.cluster (short: the containerd
# socket path must stay under 108 bytes). Afterwards: source STATE_DIR/env.sh
# Env knobs: NODES (default 1; see section 7b) NODE_NAME NODE_IP PHASES ("prereq build pki config start addons")
set -Eeuo pipefail
trap 'echo "up.sh: FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
STATE=${1:-${CLUSTER_DIR:-$repo/.cluster}}
mkdir -p "$STATE"; STATE=$(cd "$STATE" && pwd)
# shellcheck source=../images/images.sh
. "$repo/hack/images/images.sh"
ALL_PHASES="prereq build pki config start addons"
PHASES=${PHASES:-$ALL_PHASES}

SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SVC_IP=10.96.0.1
DNS_SVC_IP=10.96.0.10
CLUSTER_CIDR=10.244.0.0/16
POD_SUBNET=10.244.0.0/24      # = the podCIDR the controller-manager gives the (only) node
POD_GW=10.244.0.1
BRIDGE=kcbr0
CNI_NET=kc-net
CSI_DRIVER=hostpath.csi.local-cluster   # hack/tools/csi/hostpath; its sockets are where the kubelet
CSI_SOCKET_DIR=$STATE/kubelet/plugins/$CSI_DRIVER   # of --root-dir=$STATE/kubelet looks for them

BIN=$repo/bin LOGS=$STATE/logs PKI=$STATE/pki RUN=$STATE/run
PIDFILE=$STATE/pids
SOCK=$STATE/containerd/containerd.sock
KUBECONFIG_ADMIN=$STATE/kubeconfig
mkdir -p "$LOGS" "$PKI" "$RUN"
if [ ${#SOCK} -gt 100 ]; then echo "STATE path too long for a unix socket: $SOCK" >&2; exit 1; fi

T0=${UP_T0:-$(date +%s.%N)}
ts() { awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{printf "%.1f", a-b}'; }
log() { printf '[%6ss] %s\n' "$(ts)" "$*" | tee -a "$STATE/up.log" >&2; }
phase_on() { [[ " $PHASES " == *" $1 "* ]]; }
export PATH=$BIN:/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

NODE_NAME=${NODE_NAME:-$(hostname | tr 'A-Z' 'a-z')}
# NODES > 1 adds worker nodes NODE_NAME-2 … NODE_NAME-N beside the first (section 7b), each a kubelet with its
# own containerd, bridge, pod CIDR and cgroup root, in zones a, b, c, a, … (docs/dev/local-cluster.md)
NODES=${NODES:-1}
[[ "$NODES" =~ ^[1-9]$ ]] || { echo "NODES must be 1-9, not $NODES" >&2; exit 2; }
# Pods talk across nodes through the host's routes between bridges; masquerading that traffic (the bridge
# plugin's ipMasq) would hide the source pod's IP from NetworkPolicy, so only a one-node cluster uses it.
POD_MASQ=true; [ "$NODES" -gt 1 ] && POD_MASQ=false
# The default StorageClass: on one node our CSI driver (a host process: provisioning and deletion are RPCs, no
# pod per volume), so a test suite that creates and deletes hundreds of volumes does not also start hundreds of
# local-path helper pods on an already loaded machine; on several nodes local-path, whose volumes live on
# whichever node the pod lands on (the CSI driver serves the first node only).
DEFAULT_STORAGE_CLASS=csi-hostpath-expandable; [ "$NODES" -gt 1 ] && DEFAULT_STORAGE_CLASS=local-path
if [ -z "${NODE_IP:-}" ]; then
  NODE_IP=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' || true)
  [ -n "$NODE_IP" ] || NODE_IP=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
fi
[ -n "$NODE_IP" ] || { echo "cannot determine NODE_IP; set it" >&2; exit 1; }

###############################################################################
# Already up: the cluster a complete run of this script brought up, with the same settings, scripts and
# tool pins, still runs as it left it (every process it started alive, the API server ready, every node
# Ready, the add-ons available): nothing to do. The full run's idempotent checks cost about a second each on
# a loaded machine, a minute for four nodes, and `make test` asks for the cluster again between its suites.
###############################################################################
is_running() { # name -> 0 if the recorded pid is alive and still runs the recorded exe
  local line pid exe
  line=$(grep "^$1 " "$PIDFILE" | tail -1) || return 1
  pid=$(awk '{print $2}' <<<"$line"); exe=$(awk '{print $3}' <<<"$line")
  [ -d "/proc/$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]
}
apiserver_ready() { curl -sf --cacert "$PKI/ca.crt" https://127.0.0.1:6443/readyz; }
UP_DONE=$STATE/up.done
up_fingerprint() {
  { echo "NODES=$NODES NODE_NAME=$NODE_NAME NODE_IP=$NODE_IP PHASES=$PHASES"
    cat "$here"/*.sh "$repo/hack/tools/build.sh" "$repo/hack/images/images.sh" "$repo"/hack/tools/*/go.mod
  } | sha256sum | cut -d' ' -f1
}
still_up() {
  [ -f "$UP_DONE" ] && [ "$(cat "$UP_DONE")" = "$(up_fingerprint)" ] || return 1
  local name nodes
  while read -r name _; do is_running "$name" || return 1; done <"$PIDFILE"
  apiserver_ready >/dev/null || return 1
  nodes=$(kubectl --kubeconfig "$KUBECONFIG_ADMIN" get nodes --no-headers 2>/dev/null) || return 1
  [ "$(wc -l <<<"$nodes")" -eq "$NODES" ] && [ "$(awk '$2 == "Ready"' <<<"$nodes" | wc -l)" -eq "$NODES" ] || return 1
  kubectl --kubeconfig "$KUBECONFIG_ADMIN" get deploy -A --no-headers 2>/dev/null |
    awk '$2 ~ /^(coredns|local-path-provisioner|csi-hostpath-controller)$/ { split($3, r, "/"); if (r[1] > 0 && r[1] == r[2]) n++ }
         END { exit n != 3 }'
}
if [ "$PHASES" = "$ALL_PHASES" ] && still_up; then
  log "cluster is up, as the run that started it left it ($NODES node(s) Ready): nothing to do"
  exit 0
fi
# a complete run rewrites what the mark vouches for; it marks again when it ends well
[ "$PHASES" != "$ALL_PHASES" ] || rm -f "$UP_DONE"

###############################################################################
# 0. prerequisites: Debian 12 packages (installed when missing) + Go for the tools
###############################################################################
APT_PACKAGES="containerd runc containernetworking-plugins busybox-static iptables iproute2 jq openssl curl file util-linux"
missing_prereqs() {
  local c
  for c in containerd containerd-shim-runc-v2 runc ctr iptables iptables-save iptables-restore \
           ip6tables-save ip jq openssl curl file setsid nsenter mount tar sha256sum; do
    command -v "$c" >/dev/null || echo "$c"
  done
  for c in bridge host-local portmap loopback; do [ -x "/usr/lib/cni/$c" ] || echo "/usr/lib/cni/$c"; done
  [ -x /bin/busybox ] && file -L /bin/busybox | grep -q 'statically linked' || echo "/bin/busybox (static)"
}
if phase_on prereq; then
  missing=$(missing_prereqs | paste -sd' ' -)
  if [ -n "$missing" ]; then
    log "prereq: missing $missing -> apt-get install $APT_PACKAGES"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $APT_PACKAGES >"$LOGS/apt.log" 2>&1 ||
      { apt-get update -qq >>"$LOGS/apt.log" 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $APT_PACKAGES >>"$LOGS/apt.log" 2>&1; } ||
      { echo "apt-get install failed, see $LOGS/apt.log" >&2; exit 1; }
    missing=$(missing_prereqs | paste -sd' ' -)
    [ -z "$missing" ] || { echo "still missing after apt-get install: $missing" >&2; exit 1; }
  fi
  command -v go >/dev/null || { echo "missing: go (>= 1.26, at /usr/local/go)" >&2; exit 1; }
fi

###############################################################################
# 1. binaries: the project's pinned tools (no-op when cached), linked into bin/
###############################################################################
if phase_on build; then
  "$repo/hack/tools/build.sh" kubernetes etcd-v3.6 coredns local-path-provisioner crictl pause netpol csi
  log "binaries: $(kube-apiserver --version), etcd $(etcd --version | sed -n 's/^etcd Version: //p')"
fi

# write stdin to $1 only if the content differs (kube-proxy exits when its config
# file is rewritten, even with identical content)
write_if_changed() {
  local tmp; tmp=$(mktemp "$1.XXXXXX"); cat > "$tmp"
  if [ -f "$1" ] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

###############################################################################
# 2. env.sh: KUBECONFIG, PATH (bin/: kubectl, etcdctl, crictl...), containerd/CRI endpoints
###############################################################################
write_if_changed "$STATE/env.sh" <<EOF
# source me: local cluster "$STATE" (hack/cluster/up.sh)
export CLUSTER_DIR=$STATE
export KUBECONFIG=$KUBECONFIG_ADMIN
export PATH=$BIN:\$PATH
export CONTAINERD_ADDRESS=$SOCK CONTAINERD_NAMESPACE=k8s.io
export CONTAINER_RUNTIME_ENDPOINT=unix://$SOCK IMAGE_SERVICE_ENDPOINT=unix://$SOCK
EOF
export CONTAINERD_ADDRESS=$SOCK CONTAINERD_NAMESPACE=k8s.io

###############################################################################
# 3. PKI (openssl): CA, front-proxy CA, serving + client certs, SA key pair
###############################################################################
ssl_ca() { # name CN
  [ -f "$PKI/$1.crt" ] && return 0
  openssl genrsa -out "$PKI/$1.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$PKI/$1.key" -subj "/CN=$2" -days 3650 -sha256 -out "$PKI/$1.crt" \
    -config <(printf '[req]\ndistinguished_name=dn\n[dn]\n[v3]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature,keyEncipherment\nsubjectKeyIdentifier=hash\n') -extensions v3
}
ssl_cert() { # name CN O(or "") eku(serverAuth|clientAuth|both) SAN(or "") ca
  local n=$1 cn=$2 o=$3 eku=$4 san=$5 ca=${6:-ca}
  [ -f "$PKI/$n.crt" ] && return 0
  [ "$eku" = both ] && eku=serverAuth,clientAuth
  openssl genrsa -out "$PKI/$n.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$n.key" -subj "${o:+/O=$o}/CN=$cn" -out "$PKI/$n.csr"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s\n' \
    "$eku" "${san:+subjectAltName=$san}" > "$PKI/$n.ext"
  openssl x509 -req -in "$PKI/$n.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$n.ext" -out "$PKI/$n.crt" 2>/dev/null
  rm -f "$PKI/$n.csr" "$PKI/$n.ext"
}
kubeconfig() { # file user certname
  write_if_changed "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kc
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$3.crt")
    client-key-data: $(base64 -w0 "$PKI/$3.key")
contexts:
- name: kc
  context: {cluster: kc, user: $2}
current-context: kc
EOF
  chmod 600 "$1"
}
if phase_on pki; then
  log "pki"
  # node IP changed since last run -> re-issue the certificates that carry it
  if [ -f "$PKI/node-ip" ] && [ "$(cat "$PKI/node-ip")" != "$NODE_IP" ]; then
    rm -f "$PKI/apiserver.crt" "$PKI/kubelet-serving.crt"
  fi
  echo "$NODE_IP" > "$PKI/node-ip"
  ssl_ca ca kc-ca
  ssl_ca front-proxy-ca kc-front-proxy-ca
  ssl_cert apiserver kube-apiserver "" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE_NAME,IP:127.0.0.1,IP:$KUBERNETES_SVC_IP,IP:$NODE_IP"
  ssl_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth ""
  ssl_cert admin kubernetes-admin system:masters clientAuth ""
  ssl_cert controller-manager system:kube-controller-manager "" clientAuth ""
  ssl_cert scheduler system:kube-scheduler "" clientAuth ""
  ssl_cert kube-proxy system:kube-proxy "" clientAuth ""
  ssl_cert netpol system:kc-netpol-enforcer "" clientAuth ""
  ssl_cert kubelet "system:node:$NODE_NAME" system:nodes clientAuth ""
  ssl_cert kubelet-serving "system:node:$NODE_NAME" system:nodes serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
  ssl_cert front-proxy-client front-proxy-client "" clientAuth "" front-proxy-ca
  [ -f "$PKI/sa.key" ] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
  kubeconfig "$KUBECONFIG_ADMIN" kubernetes-admin admin
  kubeconfig "$PKI/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
  kubeconfig "$PKI/scheduler.kubeconfig" system:kube-scheduler scheduler
  kubeconfig "$PKI/kube-proxy.kubeconfig" system:kube-proxy kube-proxy
  kubeconfig "$PKI/netpol.kubeconfig" system:kc-netpol-enforcer netpol
  kubeconfig "$PKI/kubelet.kubeconfig" "system:node:$NODE_NAME" kubelet
fi
export KUBECONFIG=$KUBECONFIG_ADMIN

###############################################################################
# 4. config files: containerd, CNI, kubelet, kube-proxy
###############################################################################
# one node's files: containerd (root, state, socket and runc root under DIR, CNI config from CNI_DIR),
# its CNI network (bridge, pod subnet) and its kubelet (serving cert, runtime socket, log dir, extra lines)
containerd_config() { # DIR CNI_DIR
  write_if_changed "$1/config.toml" <<EOF
version = 2
root = "$1/root"
state = "$1/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$1/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$1/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # THE key fix on this VM: the capability bounding set lacks CAP_SYS_RESOURCE, so
  # no process may lower oom_score_adj below 0; kubelet asks -998 for sandboxes
  # (-997 for Guaranteed pods) and runc's nsexec dies -> "can't get final child's
  # PID from pipe: EOF". This clamps the requested value to containerd's own (0).
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$1/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$2"
  # Pulls of ghcr.io and gcr.io images go to the cluster's registry first (hack/olmv1/install.sh, plain
  # HTTP on its Service's ClusterIP, which kube-proxy's OUTPUT rules route from this host), then upstream.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$1/certs.d"
EOF
  local host
  for host in $REGISTRY_MIRRORED; do
    mkdir -p "$1/certs.d/$host"
    write_if_changed "$1/certs.d/$host/hosts.toml" <<EOF
server = "https://$host"
[host."http://$REGISTRY_SVC_IP:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
EOF
  done
}
cni_config() { # CNI_DIR BRIDGE SUBNET GATEWAY
  write_if_changed "$1/net.d/10-kc.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$2",
      "isGateway": true,
      "ipMasq": $POD_MASQ,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$1/ipam",
        "ranges": [[{"subnet": "$3", "gateway": "$4"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}
kubelet_config() { # FILE SERVING_CERT SOCK POD_LOGS [EXTRA_YAML]
  { cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/$2.crt
tlsPrivateKeyFile: $PKI/$2.key
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$3
clusterDNS: [$DNS_SVC_IP]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $4
failSwapOn: false
oomScoreAdj: 0            # -999 (default) is refused here: no CAP_SYS_RESOURCE in the VM
staticPodPath: ""
rotateCertificates: false
serverTLSBootstrap: false
maxPods: 200               # make bench-scale runs 100 one-member clusters beside the e2e suite; the node /24 has 254 addresses
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, nodefs.inodesFree: 2%, imagefs.available: 2%}
# images are imported locally and can never be re-pulled: never garbage-collect them
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
    printf '%s' "${5:-}"; } | write_if_changed "$1"
}
if phase_on config; then
  log "config (node $NODE_NAME, ip $NODE_IP)"
  mkdir -p "$STATE/containerd" "$STATE/cni/net.d" "$STATE/cni/ipam" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/local-path"
  containerd_config "$STATE/containerd" "$STATE/cni/net.d"
  cni_config "$STATE/cni" "$BRIDGE" "$POD_SUBNET" "$POD_GW"
  kubelet_config "$STATE/kubelet-config.yaml" kubelet-serving "$SOCK" "$STATE/pod-logs"
  write_if_changed "$STATE/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE_NAME
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0}
EOF
fi

###############################################################################
# 5. process management
###############################################################################
touch "$PIDFILE"
# what down.sh needs to clean up precisely
write_if_changed "$STATE/cluster.env" <<EOF
STATE=$STATE
SOCK=$SOCK
BRIDGE=$BRIDGE
CNI_NET=$CNI_NET
POD_SUBNET=$POD_SUBNET
NODE_NAME=$NODE_NAME
NODE_IP=$NODE_IP
EOF
start_proc() { # name cmd args...
  local name=$1; shift
  if is_running "$name"; then log "$name already running"; return 0; fi
  local exe; exe=$(readlink -f "$(command -v "$1")")
  # not a process-group leader -> setsid does not fork: $! is the daemon's own pid. Descriptors above 2
  # are closed first: a daemon must not keep the caller's (a `flock` around `make test-e2e` would
  # otherwise stay locked for as long as the cluster runs).
  (
    for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
    exec setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null
  ) &
  local pid=$!
  { grep -v "^$name " "$PIDFILE" || true; echo "$name $pid $exe"; } > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"
  log "started $name (pid $pid)"
}
wait_for() { # desc timeout_s cmd...
  local desc=$1 t=$2 i=0; shift 2
  until "$@" >/dev/null 2>&1; do
    i=$((i+1)); [ $i -gt $((t*2)) ] && { log "TIMEOUT waiting for $desc"; return 1; }
    sleep 0.5
  done
  log "ready: $desc"
}
# node_ready NAME [SINCE]: Ready by a status the kubelet posted at or after SINCE (date -u +%FT%TZ), which a
# kubelet does as it starts: a Node kept from an earlier run of the cluster (down.sh keeps etcd's data)
# still says Ready whether or not its kubelet now runs. Without SINCE, any Ready.
node_ready() {
  local s
  s=$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}' 2>/dev/null) || return 1
  [ "${s%% *}" = True ] && [[ ! "${s#* }" < "$2" ]]
}
# cri_ready SOCKET: containerd's CRI plugin answers. containerd's own API answers before the plugin has
# initialised, and a kubelet started in between exits ("server is not initialized yet").
cri_ready() { crictl --runtime-endpoint "unix://$1" --timeout 2s version >/dev/null 2>&1; }

###############################################################################
# 6. images (built FROM nothing by hack/images) -- needs containerd, so inside "start"
###############################################################################
# into the containerd at SOCK only, and only when it has not got them: a containerd started before, or
# one powered on again (hack/cluster/node.sh), keeps its image store on disk (make cluster-load refreshes)
load_images() { # SOCK
  local have; have=$(ctr -a "$1" -n k8s.io images ls -q)
  grep -qxF "$PAUSE_IMAGE" <<<"$have" && return 0
  CLUSTER_DIR=$STATE LOAD_SOCKET=$1 "$repo/hack/images/build.sh" load system
}

###############################################################################
# 7. start the node
###############################################################################
if phase_on start; then
  log "start"
  # kernel prerequisites (everything is built in; there are no modules to load)
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1
  [ "$(sysctl -n fs.inotify.max_user_instances)" -ge 8192 ] || sysctl -qw fs.inotify.max_user_instances=8192
  [ "$(sysctl -n fs.inotify.max_user_watches)" -ge 524288 ] || sysctl -qw fs.inotify.max_user_watches=524288

  # Traffic to a cluster address that has no path inside the machine must fail here, not leave through the
  # default route. A Service kube-proxy has not programmed yet (its rules follow a new Service by up to a
  # sync) is not DNATed, and the sandbox's egress proxy answered such a connection once: kube-apiserver's
  # aggregator then kept its HTTP/2 connection to packageserver's new Service on that proxy, whose 404s
  # left OLM's APIService unavailable for good. Those are refused at once. A pod IP of no node's bridge is
  # one of a node that node.sh netdown cut off (its bridge down, its route gone): those packets are dropped,
  # since a partition is silence, not a refusal, and peers and the operator must find it by their timeouts.
  # The filter table sees a packet after kube-proxy's DNAT, so only untranslated Service addresses match; a
  # host packet DNATed to a pod still names the device of its first route (eth0) in OUTPUT, hence
  # "not DNATed" on the pod range, and the bridges' own addresses are the host's.
  iptables -N KC-GUARD 2>/dev/null || true
  iptables -F KC-GUARD
  iptables -A KC-GUARD -d "$SERVICE_CIDR" -p tcp -j REJECT --reject-with tcp-reset
  iptables -A KC-GUARD -d "$SERVICE_CIDR" -j REJECT
  unrouted_pod_range=(-d "$CLUSTER_CIDR" ! -o kcbr+ -m addrtype ! --dst-type LOCAL -m conntrack ! --ctstate DNAT)
  iptables -A KC-GUARD "${unrouted_pod_range[@]}" -j DROP
  for chain in OUTPUT FORWARD; do iptables -C "$chain" -j KC-GUARD 2>/dev/null || iptables -A "$chain" -j KC-GUARD; done

  # remember host state that is shared with other CNI / kubelet users, so down.sh
  # only removes what this cluster created
  if [ ! -f "$STATE/host-baseline" ]; then
    { iptables -t nat -S CNI-HOSTPORT-DNAT >/dev/null 2>&1 && echo HOSTPORT_PREEXIST=1 || echo HOSTPORT_PREEXIST=0
      [ -d /var/lib/kubelet ] && echo VARLIBKUBELET_PREEXIST=1 || echo VARLIBKUBELET_PREEXIST=0; } > "$STATE/host-baseline"
  fi
  start_proc containerd containerd --config "$STATE/containerd/config.toml"
  wait_for containerd 60 ctr -a "$SOCK" version
  load_images "$SOCK"

  start_proc etcd etcd --name kc --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster kc=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
  wait_for etcd 60 etcdctl --endpoints=http://127.0.0.1:2379 endpoint health

  # MutatingAdmissionPolicy (beta, off by default in 1.34): test/e2e/openshift_scc_test.go emulates
  # OpenShift's restricted-v2 SCC, which assigns a UID to pods that name none, with one.
  start_proc kube-apiserver kube-apiserver \
    --advertise-address="$NODE_IP" --bind-address=0.0.0.0 --secure-port=6443 \
    --etcd-servers=http://127.0.0.1:2379 \
    --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --feature-gates=MutatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-extra-headers-prefix=X-Remote-Extra- --requestheader-group-headers=X-Remote-Group \
    --requestheader-username-headers=X-Remote-User \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key"
  wait_for kube-apiserver 120 apiserver_ready

  start_proc kube-controller-manager kube-controller-manager \
    --kubeconfig="$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$PKI/controller-manager.kubeconfig" --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false \
    --client-ca-file="$PKI/ca.crt" --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
    --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" --use-service-account-credentials=true \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --controllers='*,bootstrapsigner,tokencleaner'
  start_proc kube-scheduler kube-scheduler \
    --kubeconfig="$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig="$PKI/scheduler.kubeconfig" --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false

  wait_for "CRI of containerd" 60 cri_ready "$SOCK"
  since=""   # a kubelet that runs already posts no new status: its Node's Ready is current
  is_running kubelet || since=$(date -u +%FT%TZ)
  start_proc kubelet kubelet --config="$STATE/kubelet-config.yaml" --kubeconfig="$PKI/kubelet.kubeconfig" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
    --root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki"
  start_proc kube-proxy kube-proxy --config="$STATE/kube-proxy-config.yaml"
  wait_for "node $NODE_NAME Ready" 180 node_ready "$NODE_NAME" "$since"
fi

###############################################################################
# 7b. more nodes (NODES > 1): NODE_NAME-2 … NODE_NAME-N, on this same host
###############################################################################
# Node K is a kubelet with its own containerd (root, state, socket and runc root under STATE/nodes/K), its own
# CNI bridge kcbrK on the pod CIDR the controller-manager allocated it, its own kubelet root and cgroup root
# (/kc-nodes/K), and ports 10240+10K (kubelet) and 10238+10K (healthz). All nodes share the host's network
# namespace: pods on different bridges reach each other through the host's connected routes, and the one
# kube-proxy serves every node. Zones: topology.kubernetes.io/zone a, b, c, a, … by node number.
zone_of() { local z=(a b c); echo "${z[$((($1 - 1) % 3))]}"; }
node_pod_cidr() { kubectl get node "$1" -o jsonpath='{.spec.podCIDR}' 2>/dev/null | grep .; }
if phase_on start; then
  # a cluster brought up with more nodes before: the nodes beyond NODES that no longer run leave the API
  for d in "$STATE"/nodes/[2-9]; do
    k=${d##*/}
    if [ -d "$d" ] && [ "$k" -gt "$NODES" ] && ! is_running "kubelet-$k"; then
      kubectl delete node "$NODE_NAME-$k" --ignore-not-found >/dev/null && log "node $NODE_NAME-$k removed (NODES=$NODES)"
    fi
  done
fi
if phase_on start && [ "$NODES" -gt 1 ]; then
  kubectl label node "$NODE_NAME" --overwrite "topology.kubernetes.io/zone=$(zone_of 1)" >/dev/null
  loads=()
  for ((k = 2; k <= NODES; k++)); do
    name=$NODE_NAME-$k dir=$STATE/nodes/$k
    log "node $name (zone $(zone_of "$k"))"
    mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam" "$dir/kubelet" "$dir/pod-logs"
    ssl_cert "kubelet-$k" "system:node:$name" system:nodes clientAuth ""
    ssl_cert "kubelet-serving-$k" "system:node:$name" system:nodes serverAuth "DNS:$name,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
    kubeconfig "$PKI/kubelet-$k.kubeconfig" "system:node:$name" "kubelet-$k"
    containerd_config "$dir/containerd" "$dir/cni/net.d"
    kubelet_config "$dir/kubelet-config.yaml" "kubelet-serving-$k" "$dir/containerd/containerd.sock" "$dir/pod-logs" \
      "$(printf 'port: %d\nhealthzPort: %d\ncgroupRoot: /kc-nodes/%d\n' $((10240 + 10 * k)) $((10238 + 10 * k)) "$k")"
    # the kubelet refuses a cgroup root that does not exist in every hierarchy (cgroup v1 here)
    for c in /sys/fs/cgroup/*; do [ -L "$c" ] || [ ! -d "$c" ] || mkdir -p "$c/kc-nodes/$k"; done
    start_proc "containerd-$k" containerd --config "$dir/containerd/config.toml"
    wait_for "containerd of $name" 60 ctr -a "$dir/containerd/containerd.sock" version
    wait_for "CRI of containerd of $name" 60 cri_ready "$dir/containerd/containerd.sock"
    # nothing here pulls from a registry: the images go into every new containerd at once, before any kubelet
    load_images "$dir/containerd/containerd.sock" & loads+=($!)
  done
  for pid in "${loads[@]}"; do wait "$pid" || { log "loading the system images into a node failed"; exit 1; }; done
  for ((k = 2; k <= NODES; k++)); do
    name=$NODE_NAME-$k dir=$STATE/nodes/$k
    # A node deleted from the API registers again with another pod CIDR: no sandbox may start on its
    # old network before the new one is written below.
    kubectl get node "$name" >/dev/null 2>&1 || rm -f "$dir"/cni/net.d/*
    node_since[k]=""
    is_running "kubelet-$k" || node_since[k]=$(date -u +%FT%TZ)
    start_proc "kubelet-$k" kubelet --config="$dir/kubelet-config.yaml" --kubeconfig="$PKI/kubelet-$k.kubeconfig" \
      --hostname-override="$name" --node-ip="$NODE_IP" --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet/pki" \
      --node-labels="topology.kubernetes.io/zone=$(zone_of "$k")"
    wait_for "pod CIDR of $name" 120 node_pod_cidr "$name"
    cidr=$(node_pod_cidr "$name")
    # ... and the bridge keeps the old gateway address, which the bridge plugin refuses to change:
    # remove it (every container of the node is gone with it) and the plugin makes it again.
    if ip -4 -o addr show dev "kcbr$k" 2>/dev/null | grep -q . && ! ip -4 -o addr show dev "kcbr$k" | grep -qF " ${cidr%.*}.1/"; then
      ip link del "kcbr$k" && log "node $name has a new pod CIDR $cidr: its old bridge kcbr$k removed"
    fi
    echo "kcbr$k" > "$dir/bridge"
    cni_config "$dir/cni" "kcbr$k" "$cidr" "${cidr%.*}.1"
  done
  for ((k = 2; k <= NODES; k++)); do wait_for "node $NODE_NAME-$k Ready" 180 node_ready "$NODE_NAME-$k" "${node_since[k]}"; done
fi

###############################################################################
# 8. add-ons: CoreDNS (kube-dns Service 10.96.0.10) + local-path-provisioner
###############################################################################
write_addons() {
  mkdir -p "$STATE/manifests"
  # netpol-enforcer (a host process, like kube-proxy) reads what NetworkPolicy enforcement depends on
  write_if_changed "$STATE/manifests/netpol.yaml" <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "kc:netpol-enforcer"}
rules:
- apiGroups: [""]
  resources: [pods, namespaces]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kc:netpol-enforcer"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "kc:netpol-enforcer"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:kc-netpol-enforcer}]
EOF
  write_if_changed "$STATE/manifests/coredns.yaml" <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health {
           lameduck 5s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
           ttl 30
        }
        prometheus :9153
        forward . /etc/resolv.conf {
           max_concurrent 1000
        }
        cache 30 {
           disable success cluster.local
           disable denial cluster.local
        }
        loop
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      dnsPolicy: Default
      tolerations: [{key: CriticalAddonsOnly, operator: Exists}, {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        resources:
          limits: {memory: 170Mi}
          requests: {cpu: 100m, memory: 70Mi}
        volumeMounts: [{name: config-volume, mountPath: /etc/coredns, readOnly: true}]
        ports:
        - {containerPort: 53, name: dns, protocol: UDP}
        - {containerPort: 53, name: dns-tcp, protocol: TCP}
        - {containerPort: 9153, name: metrics, protocol: TCP}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}
          readOnlyRootFilesystem: true
        livenessProbe:
          httpGet: {path: /health, port: 8080, scheme: HTTP}
          initialDelaySeconds: 60
          timeoutSeconds: 5
          successThreshold: 1
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181, scheme: HTTP}
          periodSeconds: 2
      volumes:
      - name: config-volume
        configMap:
          name: coredns
          items: [{key: Corefile, path: Corefile}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
  annotations: {prometheus.io/port: "9153", prometheus.io/scrape: "true"}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $DNS_SVC_IP
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
  - {name: metrics, port: 9153, protocol: TCP}
EOF
  # derived from local-path-provisioner $LPP_VERSION deploy/local-path-storage.yaml:
  # local images, PV data under \$STATE/local-path, the default StorageClass on several nodes; the client's request limit
  # raised from client-go's 5/s: each volume takes ~10 requests (helper pod, its polls, logs, PV, events),
  # so three volumes at once throttled it by 1–3 s a volume, unevenly between benchmark runs
  write_if_changed "$STATE/manifests/local-path-storage.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: local-path-storage}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner-service-account, namespace: local-path-storage}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: local-path-provisioner-role, namespace: local-path-storage}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: local-path-provisioner-role}
rules:
- apiGroups: [""]
  resources: [nodes, persistentvolumeclaims, configmaps, pods, pods/log]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: local-path-provisioner-bind, namespace: local-path-storage}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: local-path-provisioner-role}
subjects: [{kind: ServiceAccount, name: local-path-provisioner-service-account, namespace: local-path-storage}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: local-path-provisioner-bind}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: local-path-provisioner-role}
subjects: [{kind: ServiceAccount, name: local-path-provisioner-service-account, namespace: local-path-storage}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: local-path-provisioner, namespace: local-path-storage}
spec:
  replicas: 1
  selector: {matchLabels: {app: local-path-provisioner}}
  template:
    metadata: {labels: {app: local-path-provisioner}}
    spec:
      serviceAccountName: local-path-provisioner-service-account
      containers:
      - name: local-path-provisioner
        image: $LPP_IMAGE
        imagePullPolicy: Never
        command: [local-path-provisioner, --debug, start, --config, /etc/config/config.json, --kube-client-qps=50, --kube-client-burst=100]
        ports: [{name: health, containerPort: 8080, protocol: TCP}]
        startupProbe:
          httpGet: {path: /health, port: health}
          periodSeconds: 2
          failureThreshold: 30
        livenessProbe:
          httpGet: {path: /health, port: health}
          periodSeconds: 10
        readinessProbe:
          httpGet: {path: /ready, port: health}
          periodSeconds: 2
        volumeMounts: [{name: config-volume, mountPath: /etc/config/}]
        env:
        - name: POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - {name: CONFIG_MOUNT_PATH, value: /etc/config/}
        - {name: HEALTH_PORT, value: "8080"}
      volumes:
      - name: config-volume
        configMap: {name: local-path-config}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "$([ "$DEFAULT_STORAGE_CLASS" = local-path ] && echo true || echo false)"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
kind: ConfigMap
apiVersion: v1
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  config.json: |-
    {
      "nodePathMap": [
        {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$STATE/local-path"]}
      ]
    }
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata:
      name: helper-pod
    spec:
      priorityClassName: system-node-critical
      tolerations:
        - key: node.kubernetes.io/disk-pressure
          operator: Exists
          effect: NoSchedule
      containers:
      - name: helper-pod
        image: $BUSYBOX_IMAGE
        imagePullPolicy: Never
EOF
  # csi-hostpath-expandable: our node plugin (hack/tools/csi/hostpath) runs on the host and registers
  # itself with the kubelet; upstream's external-provisioner and external-resizer run here as one pod
  # next to its socket. RBAC: the union of the two sidecars' deploy/kubernetes/rbac.yaml, less leader
  # election (one replica) and the snapshot writes (no snapshots here).
  write_if_changed "$STATE/manifests/csi-hostpath.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: csi-hostpath}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: csi-hostpath-controller, namespace: csi-hostpath}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "kc:csi-hostpath-controller"}
rules:
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch, update, patch]
- apiGroups: [""]
  resources: [persistentvolumeclaims/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [list, watch, create, update, patch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses, csinodes, volumeattachments, volumeattributesclasses]
  verbs: [get, list, watch]
- apiGroups: [snapshot.storage.k8s.io]
  resources: [volumesnapshots, volumesnapshotcontents]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kc:csi-hostpath-controller"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "kc:csi-hostpath-controller"}
subjects: [{kind: ServiceAccount, name: csi-hostpath-controller, namespace: csi-hostpath}]
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: $CSI_DRIVER}
spec:
  attachRequired: false      # no external-attacher: a volume is a directory of this node
  podInfoOnMount: false
  fsGroupPolicy: None        # a bind-mounted directory (0777), as local-path's: no recursive chown
  volumeLifecycleModes: [Persistent]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: csi-hostpath-controller, namespace: csi-hostpath}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: csi-hostpath-controller}}
  template:
    metadata: {labels: {app: csi-hostpath-controller}}
    spec:
      serviceAccountName: csi-hostpath-controller
      priorityClassName: system-cluster-critical
      containers:
      - name: csi-provisioner
        image: $CSI_PROVISIONER_IMAGE
        imagePullPolicy: Never
        args: [--csi-address=/csi/csi.sock, --v=2]
        volumeMounts: [{name: socket-dir, mountPath: /csi}]
        resources: {requests: {cpu: 10m, memory: 20Mi}}
      - name: csi-resizer
        image: $CSI_RESIZER_IMAGE
        imagePullPolicy: Never
        args: [--csi-address=/csi/csi.sock, --v=2]
        volumeMounts: [{name: socket-dir, mountPath: /csi}]
        resources: {requests: {cpu: 10m, memory: 20Mi}}
      volumes:
      - name: socket-dir
        hostPath: {path: $CSI_SOCKET_DIR, type: DirectoryOrCreate}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: csi-hostpath-expandable
  annotations: {storageclass.kubernetes.io/is-default-class: "$([ "$DEFAULT_STORAGE_CLASS" = csi-hostpath-expandable ] && echo true || echo false)"}
provisioner: $CSI_DRIVER
allowVolumeExpansion: true
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF
}
if phase_on addons; then

  write_addons
  log "addons: netpol-enforcer, coredns, local-path-provisioner, csi-hostpath"
  kubectl apply -f "$STATE/manifests/netpol.yaml" >/dev/null
  # every node shares this host's network namespace and filter table, so one enforcer protects the pods of all
  start_proc netpol-enforcer netpol-enforcer --kubeconfig="$PKI/netpol.kubeconfig"
  kubectl apply -f "$STATE/manifests/coredns.yaml" >/dev/null
  kubectl apply -f "$STATE/manifests/local-path-storage.yaml" >/dev/null
  start_proc csi-hostpath csi-hostpath --drivername="$CSI_DRIVER" --nodeid="$NODE_NAME" --data-dir="$STATE/csi-hostpath" \
    --csi-address="$CSI_SOCKET_DIR/csi.sock" --registration-dir="$STATE/kubelet/plugins_registry"
  kubectl apply -f "$STATE/manifests/csi-hostpath.yaml" >/dev/null
  wait_for "coredns available" 180 kubectl -n kube-system rollout status deploy/coredns --timeout=5s
  wait_for "local-path-provisioner available" 180 kubectl -n local-path-storage rollout status deploy/local-path-provisioner --timeout=5s
  wait_for "csi-hostpath registered with the kubelet" 60 sh -c "kubectl get csinode '$NODE_NAME' -o jsonpath='{.spec.drivers[*].name}' | grep -qw '$CSI_DRIVER'"
  wait_for "csi-hostpath controller available" 180 kubectl -n csi-hostpath rollout status deploy/csi-hostpath-controller --timeout=5s
fi

phase_on start || exit 0
log "cluster is up: $(kubectl version 2>/dev/null | tr '\n' ' ' || true)"
[ "$PHASES" != "$ALL_PHASES" ] || up_fingerprint >"$UP_DONE"
cat <<EOF

Cluster: $STATE   (stop: hack/cluster/down.sh $STATE [--purge])
Use it : source $STATE/env.sh   # KUBECONFIG, PATH with bin/ (kubectl, etcdctl, crictl)
Images : hack/images/build.sh load   # + the etcd images and the operator image (\$IMG)
EOF
