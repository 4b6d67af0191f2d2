#!/usr/bin/env bash
# Renders community/etcd-autopilot/catalog-templates/basic.yaml into
# community/etcd-autopilot/catalogs/<name>/etcd-autopilot/catalog.yaml for each catalog_names entry of
# ci.yaml, offline: `opm alpha render-template` pulls each bundle image, which the community pipeline
# builds only after the pull request; this renders the bundle from bundle/ instead and gives it the
# template's image reference. The package and channels come from the template verbatim.
# hack/community-catalog.sh --check fails when the committed catalogs differ.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
dir=community/etcd-autopilot
template=$dir/catalog-templates/basic.yaml
opm=bin/opm
hack/tools/build.sh opm >&2 # a fresh clone has no bin/ yet (no-op when cached)
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT

version=$(awk '$1 == "VERSION" && $2 == "?=" {print $3}' Makefile)
image=$(awk -v v=":$version" '/^- schema: olm.bundle$/ {b = 1; next} b && $1 == "image:" && index($2, v) {print $2} {b = 0}' "$template")
[ -n "$image" ] || { echo "community-catalog: $template lists no bundle image for v$version" >&2; exit 1; }

mkdir -p "$stage/fbc"
# package and channels: the template's entries but its olm.bundle ones
awk '/^- schema:/ {keep = ($3 != "olm.bundle")} /^entries:$/ {started = 1; next} started && keep' "$template" |
  sed 's/^- /---\n/; s/^  //' > "$stage/fbc/template.yaml"
HOME=$stage "$opm" render bundle -o yaml |
  sed "s|^image: \"\"$|image: $image|" > "$stage/fbc/bundle.yaml"
"$opm" validate "$stage/fbc"
HOME=$stage "$opm" render "$stage/fbc" -o yaml --migrate-level bundle-object-to-csv-metadata > "$stage/catalog.yaml"

status=0
for name in $(sed -n 's/^ *catalog_names: *\[\(.*\)\]/\1/p' "$dir/ci.yaml" | tr -d '" ' | tr ',' ' '); do
  out=$dir/catalogs/$name/etcd-autopilot/catalog.yaml
  if [ "${1:-}" = --check ]; then
    cmp -s "$stage/catalog.yaml" "$out" || { echo "community-catalog: $out is stale: run hack/community-catalog.sh and commit" >&2; status=1; }
  else
    mkdir -p "$(dirname "$out")"; cp "$stage/catalog.yaml" "$out"
  fi
done
exit $status
