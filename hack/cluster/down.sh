#!/usr/bin/env bash
# hack/cluster/down.sh [STATE_DIR] [--purge]
# Stops exactly the processes hack/cluster/up.sh started (pid file STATE_DIR/pids; a pid is
# only signalled while /proc/PID/exe is still the recorded binary), tears the pods down
# through CRI (so CNI removes its veths / netns / iptables / IPAM entries), then removes
# what the cluster left on the host: mounts under STATE_DIR, the CNI bridge, KUBE-*
# KC-NP-* (netpol-enforcer) and KC-GUARD (up.sh) iptables chains, this network's CNI-* chains, kubepods cgroups, /var/log/containers
# links and CNI result cache entries.
#   default   keep the cluster's data: up.sh resumes the same cluster
#   --purge   also delete STATE_DIR (etcd data, containerd images, PVs, PKI, logs); the
#             binaries (bin/, tools cache) and image archives (images cache) are kept
# STATE_DIR: argument, else $CLUSTER_DIR, else <repo>/.cluster
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
MODE= STATE=
for a in "$@"; do
  case $a in
    --purge|--purge-all) MODE=--purge ;;
    -*) echo "usage: down.sh [STATE_DIR] [--purge]" >&2; exit 2 ;;
    *) STATE=$a ;;
  esac
done
STATE=${STATE:-${CLUSTER_DIR:-$repo/.cluster}}
[ -d "$STATE" ] || { echo "down: $STATE does not exist: nothing to do" >&2; exit 0; }
STATE=$(cd "$STATE" && pwd) || exit 1
[ -f "$STATE/cluster.env" ] || { echo "$STATE/cluster.env missing: not an up.sh state dir" >&2; exit 1; }
# shellcheck disable=SC1091
. "$STATE/cluster.env"
HOSTPORT_PREEXIST=1 VARLIBKUBELET_PREEXIST=1
# shellcheck disable=SC1091
[ -f "$STATE/host-baseline" ] && . "$STATE/host-baseline"
PIDFILE=$STATE/pids
export PATH=$repo/bin:/usr/sbin:/usr/bin:/sbin:/bin
export CONTAINER_RUNTIME_ENDPOINT=unix://$SOCK IMAGE_SERVICE_ENDPOINT=unix://$SOCK
say() { echo "down: $*" >&2; }

pid_of() { # name -> pid if alive and still the recorded executable
  local line pid exe
  line=$(grep "^$1 " "$PIDFILE" 2>/dev/null | tail -1) || return 1
  pid=$(awk '{print $2}' <<<"$line"); exe=$(awk '{print $3}' <<<"$line")
  [ -d "/proc/$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] && echo "$pid"
}
stop() { # name [grace_s]
  local pid i; pid=$(pid_of "$1") || { say "$1 not running"; return 0; }
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < ${2:-20} * 5; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
  if [ -d "/proc/$pid" ]; then say "$1 ($pid) still alive, SIGKILL"; kill -KILL "$pid"; sleep 0.5; fi
  say "stopped $1 ($pid)"
}

# the nodes NODES > 1 added (up.sh section 7b): STATE/nodes/K, processes kubelet-K and containerd-K
NODE_DIRS=()
for d in "$STATE"/nodes/*/; do [ -d "$d" ] && NODE_DIRS+=("${d%/}"); done

# 1. kubelets first, so nothing restarts pods behind our back
stop kubelet 30
for d in "${NODE_DIRS[@]}"; do stop "kubelet-${d##*/}" 30; done

# 2. pods: remove every sandbox through CRI -> CNI DEL (veth, netns, CNI-* chains, IPAM)
NETNS=()
remove_pods() { # containerd socket
  local sock=$1 t
  export CONTAINER_RUNTIME_ENDPOINT=unix://$sock IMAGE_SERVICE_ENDPOINT=unix://$sock
  mapfile -t -O "${#NETNS[@]}" NETNS < <(crictl inspectp -o json $(crictl pods -q 2>/dev/null) 2>/dev/null |
    jq -r '.info.runtimeSpec.linux.namespaces[]? | select(.type=="network") | .path // empty' 2>/dev/null | sort -u)
  if [ -n "$(crictl pods -q 2>/dev/null)" ]; then
    timeout 120 crictl rmp -fa >/dev/null 2>&1 || say "crictl rmp on $sock reported errors"
  fi
  # anything CRI did not know about (e.g. ctr run) in the k8s.io namespace
  for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -a "$sock" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1
    sleep 0.5; ctr -a "$sock" -n k8s.io tasks rm -f "$t" >/dev/null 2>&1
  done
}
if pid_of containerd >/dev/null; then remove_pods "$SOCK"; fi
for d in "${NODE_DIRS[@]}"; do
  if pid_of "containerd-${d##*/}" >/dev/null; then remove_pods "$d/containerd/containerd.sock"; fi
done

# 3. node + control plane (netpol-enforcer removes its own KC-NP-* rules on TERM; step 5 is the fallback)
stop netpol-enforcer
stop csi-hostpath   # its volumes' bind mounts in pod directories go with the other mounts (step 4)
stop kube-proxy
stop containerd 30
for d in "${NODE_DIRS[@]}"; do stop "containerd-${d##*/}" 30; done
# shims of *these* containerds (they daemonize, so they are not in the pid file);
# matched by their exact -address argument, killed by pid
for s in "$SOCK" "${NODE_DIRS[@]/%//containerd/containerd.sock}"; do
  for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $s( |$)" || true); do
    say "killing leftover shim $p"; kill -KILL "$p" 2>/dev/null
  done
done
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver 30
stop etcd 30

# 4. mounts under STATE (kubelet's bind mount of its root dir, pod volumes, overlay
#    rootfs, sandbox shm), deepest first; then leftover netns of our sandboxes
for m in $(awk '{print $5}' /proc/self/mountinfo | grep -E "^$STATE(/|$)" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-); do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
done
for n in "${NETNS[@]}"; do
  [ -e "$n" ] || continue
  umount "$n" 2>/dev/null; rm -f "$n" && say "removed netns $n"
done
# ... and those of sandboxes containerd lost track of (a teardown that failed under load, a killed
# containerd): still holding a pod IP of ours with its veth, they would answer for that IP when it is
# given to another pod of the next cluster. Only namespaces named by the CNI plugins (cni-*) with an
# address in our cluster CIDR.
for f in /var/run/netns/cni-*; do
  [ -e "$f" ] || continue
  n=${f##*/}
  if ip netns exec "$n" ip -o -4 addr show 2>/dev/null | grep -q " inet 10\.244\."; then
    ip netns delete "$n" 2>/dev/null && say "removed leaked netns $n"
  fi
done

# 5. network: bridge, iptables (KUBE-* from kubelet/kube-proxy, KC-NP-* from netpol-enforcer, KC-GUARD from up.sh, CNI-* of our network)
BRIDGES=("$BRIDGE")
for d in "${NODE_DIRS[@]}"; do [ -f "$d/bridge" ] && BRIDGES+=("$(cat "$d/bridge")"); done
for b in "${BRIDGES[@]}"; do
  ip link show "$b" >/dev/null 2>&1 && ip link del "$b" && say "deleted bridge $b"
done
for v in iptables ip6tables; do
  command -v "$v-save" >/dev/null || continue
  dump=$("$v-save" -c 2>/dev/null) || continue
  # CNI chains that belong to our network carry comments with its name
  chains=$(grep -F "name: \\\"$CNI_NET\\\"" <<<"$dump" | grep -oE 'CNI-[A-Za-z0-9_-]+' | grep -v '^CNI-HOSTPORT-' | sort -u | paste -sd'|' -)
  pat='KUBE-|KC-NP-|KC-GUARD'; [ -n "$chains" ] && pat="$pat|$chains"
  # portmap's shared CNI-HOSTPORT-* chains: only if they did not exist before up.sh
  [ "$HOSTPORT_PREEXIST" = 0 ] && pat="$pat|CNI-HOSTPORT-"
  if grep -qE "$pat" <<<"$dump"; then
    grep -vE "$pat" <<<"$dump" | "$v-restore" -c && say "removed $pat rules from $v"
  fi
done
# nftables tables kube-proxy might have created (nftables mode / cleanup)
for fam in ip ip6; do nft list table "$fam" kube-proxy >/dev/null 2>&1 && nft delete table "$fam" kube-proxy; done

# 6. host leftovers: CNI result cache, /var/log/containers links, kubepods cgroups
rm -f /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null
for l in /var/log/containers/*.log; do
  [ -L "$l" ] && [[ "$(readlink "$l")" == "$STATE/"* ]] && rm -f "$l"
done
for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods /sys/fs/cgroup/*/kc-nodes; do
  [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
done

# kubelet hard-codes /var/lib/kubelet/device-plugins/ (ignores --root-dir for it)
rm -f /var/lib/kubelet/device-plugins/kubelet.sock
if [ "$VARLIBKUBELET_PREEXIST" = 0 ]; then
  rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null
fi
rm -f "$STATE/host-baseline"

# 7. optional data removal (never through a mount that is still there)
case "$MODE" in
  --purge)
    if awk '{print $5}' /proc/self/mountinfo | grep -qE "^$STATE(/|$)"; then
      say "mounts under $STATE remain; not deleting it"; exit 1
    fi
    rm -rf "$STATE"; say "removed $STATE";;
  *) : > "$PIDFILE";;
esac
say "done"
