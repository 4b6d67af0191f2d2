#!/usr/bin/env bash
# hack/olmv1/publish.sh < "NAME ARCHIVE" lines (hack/images/build.sh list ...): pushes each image
# named ghcr.io/etcd-autopilot/* into the local cluster's registry (hack/olmv1/install.sh) under the
# name its registries.conf drop-in maps it to, keeping its digest: OLM v1 then pulls our catalog
# and bundle references as written, through the mirror. Other images are skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
# shellcheck source=/dev/null
. "$CLUSTER_DIR/env.sh"
export PATH=$repo/bin:$PATH
prefix=ghcr.io/etcd-autopilot/
# The registry's pod address: this host routes to pods, and the push stays on the local cluster.
ip=$(kubectl -n olmv1-registry get pods -l app=registry -o jsonpath='{.items[?(@.status.phase=="Running")].status.podIP}')
[ -n "$ip" ] || { echo "olmv1-publish: no running registry pod (make olmv1-install)" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
while read -r name archive; do
  [[ $name == "$prefix"* ]] || continue
  rm -rf "$work/oci"; mkdir -p "$work/oci"; tar -xf "$archive" -C "$work/oci"
  crane push --insecure "$work/oci" "$ip:5000/etcd-autopilot/${name#"$prefix"}" >/dev/null 2>"$work/log" ||
    { cat "$work/log" >&2; exit 1; }
  echo "olmv1-publish: $name"
done
