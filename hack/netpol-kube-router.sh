#!/usr/bin/env bash
# hack/netpol-kube-router.sh [E2E_ARGS...] -- the upstream NetworkPolicy e2e tests (hack/netpol-upstream.sh)
# with kube-router v2.1.0 enforcing policy on the running local cluster in place of netpol-enforcer, for
# one trial run: `make test-netpol-kube-router`. Test infrastructure only (that release has reported security
# flaws; nothing of it ships). See docs/dev/netpol-conformance.md, "kube-router as the enforcer".
#
#   1. the ipset tool (Debian package; kube-router runs it) and bin/kube-router (hack/tools/build.sh kube-router)
#   2. its read-only RBAC, bound to the enforcer's user, so it reuses .cluster/pki/netpol.kubeconfig
#   3. netpol-enforcer stopped (it removes its KC-NP-* rules on SIGTERM): never two enforcers at once
#   4. one kube-router, policy only (no router, no service proxy), for every node of this one host
#   5. hack/netpol-upstream.sh with the same env (NETPOL_FOCUS, NETPOL_SKIP, NETPOL_REPORT_DIR, NETPOL_DOC)
#   6. on exit, whatever happened: kube-router stopped, its chains and ipsets removed (--cleanup-config),
#      netpol-enforcer started again (hack/cluster/up.sh's addons phase)
# Exits with the upstream run's status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
kubeconfig=$CLUSTER_DIR/kubeconfig
[ -f "$kubeconfig" ] || { echo "netpol-kube-router: no $kubeconfig: start the cluster (make cluster-up NODES=4)" >&2; exit 1; }
export KUBECONFIG=$kubeconfig PATH=$repo/bin:$PATH

command -v ipset >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ipset >/dev/null; }
"$repo/hack/tools/build.sh" kube-router

# Whatever it runs, kube-router waits for informers on all of these to sync (pkg/cmd/kube-router.go).
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "kc:kube-router"}
rules:
- {apiGroups: [""], resources: [pods, namespaces, nodes, services, endpoints], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
- {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kc:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "kc:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:kc-netpol-enforcer}]
YAML

pidfile=$CLUSTER_DIR/pids
enforcer_pid() { awk '$1 == "netpol-enforcer" {p = $2} END {print p}' "$pidfile"; }
pid=$(enforcer_pid)
if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
  kill -TERM "$pid"
  for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
  echo "netpol-kube-router: netpol-enforcer (pid $pid) stopped" >&2
fi

log=$CLUSTER_DIR/logs/kube-router.log
kr=
# v2.1.0's --cleanup-config panics in its service-proxy cleanup (no IPVS here) and leaves the filter
# table's KUBE-ROUTER-*/KUBE-POD-FW-*/KUBE-NWPLCY-* chains and KUBE-SRC-*/KUBE-DST-* ipsets behind; stale
# per-pod chains would filter the next pods given the same IPs, so they go here whatever it did.
remove_leftovers() {
  local ours='^(KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-)' chain rule
  for chain in INPUT FORWARD OUTPUT; do
    iptables -S "$chain" | grep -E -- "-j KUBE-ROUTER-" | sed 's/^-A /-D /' | while read -r rule; do
      eval "iptables $rule"
    done
  done
  for chain in $(iptables -S | awk '$1 == "-N" {print $2}' | grep -E "$ours" || true); do iptables -F "$chain"; done
  for chain in $(iptables -S | awk '$1 == "-N" {print $2}' | grep -E "$ours" || true); do iptables -X "$chain"; done
  for set in $(ipset list -n | grep -E '^KUBE-(SRC|DST)-' || true); do ipset destroy "$set"; done
}
restore() {
  if [ -n "$kr" ] && [ -d "/proc/$kr" ]; then
    kill -TERM "$kr"
    for _ in $(seq 50); do [ -d "/proc/$kr" ] || break; sleep 0.2; done
  fi
  "$repo/bin/kube-router" --cleanup-config >>"$log" 2>&1 || true
  remove_leftovers
  echo "netpol-kube-router: kube-router stopped and its chains and ipsets removed; netpol-enforcer back" >&2
  PHASES=addons "$repo/hack/cluster/up.sh" "$CLUSTER_DIR" >/dev/null 2>&1 ||
    echo "netpol-kube-router: could not start netpol-enforcer again: run hack/cluster/up.sh" >&2
}
trap restore EXIT
# --service-cluster-ip-range: this cluster's (its default /12 is wider); the health port off: the host is
# shared. env -u NODE_NAME: kube-router takes its node from NODE_NAME first, and the first node is the host's.
env -u NODE_NAME setsid "$repo/bin/kube-router" --kubeconfig="$CLUSTER_DIR/pki/netpol.kubeconfig" \
  --run-firewall=true --run-router=false --run-service-proxy=false \
  --hostname-override="$(hostname | tr '[:upper:]' '[:lower:]')" --service-cluster-ip-range=10.96.0.0/16 \
  --health-port=0 >>"$log" 2>&1 </dev/null &
kr=$!
# its first full sync renders the filter table and ipsets; the upstream tests wait for nothing of ours
for _ in $(seq 60); do
  iptables -S KUBE-ROUTER-FORWARD >/dev/null 2>&1 && break
  [ -d "/proc/$kr" ] || { echo "netpol-kube-router: kube-router exited; see $log" >&2; tail -20 "$log" >&2; exit 1; }
  sleep 1
done
iptables -S KUBE-ROUTER-FORWARD >/dev/null 2>&1 || { echo "netpol-kube-router: no KUBE-ROUTER-FORWARD chain after 60 s; see $log" >&2; exit 1; }
echo "netpol-kube-router: kube-router (pid $kr) enforcing; log $log" >&2

"$here/netpol-upstream.sh" "$@"
