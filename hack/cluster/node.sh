#!/usr/bin/env bash
# hack/cluster/node.sh poweroff|poweron|netdown|netup|status K [STATE_DIR] -- node faults on the local cluster that
# hack/cluster/up.sh brought up with NODES > 1 (node K is NODE_NAME-K, K >= 2; the first node runs the
# control plane's companions and is not switched off).
#   poweroff  every process of node K stops at once, as when its power goes: its kubelet, its containerd,
#             the containerd shims and every container (all that lives in its cgroup /kc-nodes/K), with
#             SIGKILL; nothing is cleaned up, so its pods stay on the API server as the node left them and
#             its local volumes stay on disk, unreachable until it comes back
#   poweron   starts node K's containerd and kubelet again (up.sh is idempotent: what runs stays as is)
#   netdown   cuts node K's pods off the network (its bridge kcbrK down): no packet between them and
#             anything else, while its kubelet still reports to the API server; what is sent to them
#             meanwhile is dropped on this host (up.sh's KC-GUARD), not routed out of the machine
#   netup     joins them again (the bridge up; its connected route comes back with it)
#   status    the pids of node K's kubelet and containerd, and how many processes its cgroup holds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cmd=${1:-} k=${2:-}
STATE=${3:-${CLUSTER_DIR:-$repo/.cluster}}
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ "$cmd" =~ ^(poweroff|poweron|netdown|netup|status)$ && "$k" =~ ^[2-9]$ ]] || usage
dir=$STATE/nodes/$k
[ -d "$dir" ] || { echo "node.sh: $dir does not exist: no node $k (up.sh with NODES >= $k)" >&2; exit 1; }
PIDFILE=$STATE/pids
sock=$dir/containerd/containerd.sock

pid_of() { # name -> pid if alive and still the recorded executable
  local line pid exe
  line=$(grep "^$1 " "$PIDFILE" 2>/dev/null | tail -1) || return 1
  pid=$(awk '{print $2}' <<<"$line"); exe=$(awk '{print $3}' <<<"$line")
  [ -d "/proc/$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] && echo "$pid"
}
# every process in node K's cgroup tree (its containers), read from one hierarchy that has them all
cgroup_pids() { find "/sys/fs/cgroup/pids/kc-nodes/$k" -name cgroup.procs -exec cat {} + 2>/dev/null || true; }
shim_pids() { pgrep -f "containerd-shim-runc-v2 .*-address $sock( |$)" || true; }

case $cmd in
  poweroff)
    # the kubelet and containerd first, so nothing restarts a container while the rest goes
    for name in "kubelet-$k" "containerd-$k"; do
      if pid=$(pid_of "$name"); then kill -KILL "$pid"; fi
    done
    for _ in 1 2 3 4 5; do
      pids=$( { shim_pids; cgroup_pids; } | sort -u)
      [ -n "$pids" ] || break
      kill -KILL $pids 2>/dev/null || true
      sleep 0.2
    done
    echo "node.sh: node $k powered off"
    ;;
  poweron)
    nodes=$(find "$STATE/nodes" -mindepth 1 -maxdepth 1 -type d -name '[2-9]' | wc -l)
    NODES=$((nodes + 1)) PHASES=start "$here/up.sh" "$STATE"
    ;;
  netdown|netup)
    bridge=$(cat "$dir/bridge")
    ip link set "$bridge" "${cmd#net}"
    echo "node.sh: node $k's pod network ($bridge) ${cmd#net}"
    ;;
  status)
    echo "kubelet-$k: $(pid_of "kubelet-$k" || echo down)"
    echo "containerd-$k: $(pid_of "containerd-$k" || echo down)"
    echo "processes in /kc-nodes/$k: $(cgroup_pids | wc -l), shims: $(shim_pids | wc -l)"
    ;;
esac
