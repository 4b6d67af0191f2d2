#!/usr/bin/env bash
# hack/registry-push.sh < "NAME ARCHIVE" lines (hack/images/build.sh list ...): pushes each image whose
# registry the local cluster mirrors (REGISTRY_MIRRORED: ghcr.io, gcr.io) into the cluster's registry
# (hack/olmv1/install.sh) under its name without the registry host, keeping its digest:
# ghcr.io/etcd-autopilot/etcd-autopilot-catalog:v0.2.0 as etcd-autopilot/etcd-autopilot-catalog:v0.2.0.
# Then every node's containerd (certs.d hosts.toml, hack/cluster/up.sh) and OLM v1's controllers
# (registries.conf drop-in) pull the references as written, through that mirror. Other images are skipped.
# PUSH_TO=HOST:PORT pushes there instead (default: the registry pod's address, which this host routes to).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
# shellcheck source=images/images.sh
. "$here/images/images.sh"
export PATH=$repo/bin:$PATH
reg=${PUSH_TO:-}
if [ -z "$reg" ]; then
  # shellcheck source=/dev/null
  . "$CLUSTER_DIR/env.sh"
  ip=$(kubectl -n olmv1-registry get pods -l app=registry -o jsonpath='{.items[?(@.status.phase=="Running")].status.podIP}')
  [ -n "$ip" ] || { echo "registry-push: no running registry pod (make olmv1-install)" >&2; exit 1; }
  reg=$ip:$REGISTRY_PORT
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
while read -r name archive; do
  [[ " $REGISTRY_MIRRORED " == *" ${name%%/*} "* ]] || continue
  rm -rf "$work/oci"; mkdir -p "$work/oci"; tar -xf "$archive" -C "$work/oci"
  crane push --insecure "$work/oci" "$reg/${name#*/}" >/dev/null 2>"$work/log" ||
    { cat "$work/log" >&2; exit 1; }
  echo "registry-push: $name"
done
