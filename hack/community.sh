#!/usr/bin/env bash
# Generates the community submission under community/, laid out as the community catalog repositories
# (k8s-operatorhub/community-operators, redhat-openshift-ecosystem/community-operators-prod) hold it:
#
#   community/operators/etcd-autopilot/ci.yaml                      hand-written (reviewers, FBC settings)
#   community/operators/etcd-autopilot/catalog-templates/basic.yaml hand-written; hack/release.sh appends
#   community/operators/etcd-autopilot/<VERSION>/                   bundle/{manifests,metadata,tests} copied
#   community/catalogs/<name>/etcd-autopilot/catalog.yaml           rendered, one per ci.yaml catalog_names
#
# Only the current VERSION's directory is (re)written: an earlier one is what was published, and stays.
# The catalogs are rendered offline with opm from the version directories: `opm alpha render-template`
# would pull each bundle image, which the community pipeline builds only from the merged pull request,
# so each bundle is rendered from its directory and given the template's image reference. Rendering
# migrates olm.bundle.object to olm.csv.metadata (the community check rejects olm.bundle.object).
#
# hack/community.sh --check regenerates into a scratch copy and fails when community/ differs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
pkg=etcd-autopilot
check=${1:-}
[ -z "$check" ] || [ "$check" = --check ] || { echo "usage: $0 [--check]" >&2; exit 2; }
opm=${OPM:-bin/opm}
# a fresh clone has no bin/ yet (no-op when cached); OPM=path skips this
[ -n "${OPM:-}" ] || hack/tools/build.sh opm >&2
die() { echo "community: $*" >&2; exit 1; }

stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
cp -r community "$stage/community"
root=$stage/community
op=$root/operators/$pkg
template=$op/catalog-templates/basic.yaml

# The current release's bundle directory: bundle/ as make bundle rendered it.
version=$(awk '$1 == "VERSION" && $2 == "?=" {print $3}' Makefile)
rm -rf "${op:?}/$version"; mkdir -p "$op/$version"
cp -r bundle/manifests bundle/metadata bundle/tests "$op/$version/"

# Catalogs: the template's package and channels verbatim, each olm.bundle rendered from the version
# directory its image's tag names (a reference may carry a digest after the tag: name:1.2.3@sha256:…).
mkdir -p "$stage/fbc"
awk '/^- schema:/ {keep = ($3 != "olm.bundle")} /^entries:$/ {started = 1; next} started && keep' "$template" |
  sed 's/^- /---\n/; s/^  //' > "$stage/fbc/template.yaml"
n=0
for image in $(awk '/^- schema: olm.bundle$/ {b = 1; next} b && $1 == "image:" {print $2} {b = 0}' "$template"); do
  v=${image%%@*}; v=${v##*:}
  [ -d "$op/$v/manifests" ] || die "the template's bundle $image names version $v, which has no directory under $op"
  HOME=$stage "$opm" render "$op/$v" -o yaml | sed "s|^image: \"\"$|image: $image|" > "$stage/fbc/bundle-$v.yaml"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || die "$template lists no olm.bundle"
grep -q "^- name: $pkg.v$version\$" "$stage/fbc/template.yaml" || die "no channel of $template has $pkg.v$version"
"$opm" validate "$stage/fbc"
HOME=$stage "$opm" render "$stage/fbc" -o yaml --migrate-level bundle-object-to-csv-metadata > "$stage/catalog.yaml"

rm -rf "$root/catalogs"
for name in $(sed -n 's/^ *catalog_names: *\[\(.*\)\]/\1/p' "$op/ci.yaml" | tr -d '" ' | tr ',' ' '); do
  mkdir -p "$root/catalogs/$name/$pkg"
  cp "$stage/catalog.yaml" "$root/catalogs/$name/$pkg/catalog.yaml"
done
[ -d "$root/catalogs" ] || die "$op/ci.yaml maps the template to no catalog"

if [ "$check" = --check ]; then
  diff -r community "$root" >&2 || die "community/ is stale: run make community (or make bundle) and commit"
else
  rm -rf community/catalogs "community/operators/$pkg/$version"
  cp -r "$root/catalogs" community/catalogs
  cp -r "$op/$version" "community/operators/$pkg/$version"
fi
