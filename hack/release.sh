#!/usr/bin/env bash
# Cuts the next release of the OLM package: hack/release.sh NEW_VERSION [--promote]
#
#   1. Makefile: VERSION=NEW_VERSION; RELEASES gets the release being replaced (the current VERSION at
#      HEAD, whose committed bundle/ is that release's bundle), which becomes PREV_VERSION/PREV_COMMIT
#      and is built into the catalog from then on; BUNDLE_CREATED_AT = now.
#   2. The CSV base: replaces the previous release; olm.skipRange '>=OLDEST <NEW' (any earlier version
#      upgrades in one hop, so a cluster that skipped releases does not walk through each).
#   3. catalog/templates: NEW_VERSION enters the candidate and fast channels (and stable with --promote),
#      replacing the previous release there, with the same skipRange; its bundle image is listed.
#   4. community/operators/etcd-autopilot/catalog-templates/basic.yaml: the same, in the same channels,
#      replacing the previous release only if the community catalogs have it; its bundle image is the
#      community pipeline's (quay.io/community-operator-pipeline-prod/etcd-autopilot:NEW_VERSION).
#   5. make bundle (re-renders and validates bundle/, and regenerates community/: the release's bundle
#      directory and the rendered catalogs), then the Go checks of the bundle and of community/.
#   0. First of all, every image the bundle names is resolved to its digest (hack/digests.sh): the
#      operator's IMAGE_TAG_BASE:vNEW_VERSION (it runs the worker too) and each supported etcd
#      release's upstream image (config/manager's RELATED_IMAGE_ETCD_*), in their own registries, or with
#      --registry HOST[:PORT] in that mirror under the same paths (the local cluster's registry in the
#      tests). The digests go into config/manifests/image-digests.txt, and make bundle writes them into
#      the CSV (containers, RELATED_IMAGE_* env, relatedImages, containerImage) and sets
#      features.operators.openshift.io/disconnected "true", checked below. An image missing fails the
#      release before anything is written. --tags skips this (the bundle keeps tag references and
#      claims "false").
# It commits nothing: review `git diff`, then `make verify-bundle catalog-build test-olm` (the OLM e2e
# upgrades from PREV_VERSION, now the release just cut from), commit, tag vNEW_VERSION.
# Once the bundle image of the release is pushed: hack/release.sh --pin-bundle NEW_VERSION
# [--registry HOST[:PORT]] resolves it too and names it by digest in catalog/templates, so the
# catalog built next pins it (docs/dev/release.md).
#
# Why opm's basic template and not its semver template: the semver template names its channels after
# the version stream (stable-v0, stable-v0.2), so switching would strand every Subscription on
# `stable`; and it draws its own edges where we choose replaces + skipRange deliberately.
#
# Promotion of a release already cut to stable: hack/release.sh --promote-only VERSION.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
pkg=etcd-autopilot
template=catalog/templates/$pkg.yaml
community=community/operators/$pkg/catalog-templates/basic.yaml
community_bundles=quay.io/community-operator-pipeline-prod/$pkg
csv=config/manifests/bases/$pkg.clusterserviceversion.yaml
bundle_repo=$(awk '$1 == "IMAGE_TAG_BASE" {print $3}' Makefile)-bundle

die() { echo "release: $*" >&2; exit 1; }
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$'

# shellcheck source=catalog-channel.sh
. "$repo/hack/catalog-channel.sh"
# channel_add [-t TEMPLATE] CHANNEL NEW PREV RANGE: add_to_channel on our template (or TEMPLATE), with
# the reason when it cannot
channel_add() {
  local rc=0 tpl=$template
  if [ "$1" = -t ]; then tpl=$2; shift 2; fi
  add_to_channel "$tpl" "$pkg" "$@" || rc=$?
  case $rc in
    0) ;;
    3) die "$2 is already in channel $1 of $tpl" ;;
    *) die "no channel $1 in $tpl" ;;
  esac
}

lock=config/manifests/image-digests.txt
# parse_opts ARGS...: REGISTRY from --registry HOST[:PORT], TAGS from --tags, the rest into ARGS
# (REGISTRY only from the option: an ambient variable of that common name must not redirect a release)
ARGS=() TAGS= REGISTRY=
parse_opts() {
  while [ $# -gt 0 ]; do
    case $1 in
      --registry) [ -n "${2:-}" ] || die "--registry needs HOST[:PORT]"; REGISTRY=$2; shift 2 ;;
      --registry=*) REGISTRY=${1#*=}; shift ;;
      --tags) TAGS=1; shift ;;
      *) ARGS+=("$1"); shift ;;
    esac
  done
}
# digests ARGS...: hack/digests.sh with this release's registry (and only for it: make bundle's tests
# must not inherit it)
digests() { REGISTRY=$REGISTRY hack/digests.sh "$@"; }

if [ "${1:-}" = --pin-bundle ]; then
  shift; parse_opts "$@"
  v=${ARGS[0]:-}; [[ $v =~ $semver ]] && [ ${#ARGS[@]} = 1 ] || die "usage: $0 --pin-bundle VERSION [--registry HOST[:PORT]]"
  grep -q "^  image: $bundle_repo:v$v\$" "$template" || die "$template names no bundle $bundle_repo:v$v"
  digests resolve "$lock" "$bundle_repo:v$v"
  digests pin "$lock" "$template"
  echo "release: the v$v bundle is pinned by digest in $template; build the catalog (make catalog-build)"
  exit 0
fi

if [ "${1:-}" = --promote-only ]; then
  v=${2:-}; [[ $v =~ $semver ]] || die "usage: $0 --promote-only VERSION"
  grep -q "^  - name: $pkg.v$v\$" "$template" || die "v$v was never cut"
  entry=$(awk -v n="$pkg.v$v" '$0 == "  - name: " n {p = 1; print; next} p && /^    / {print; next} {p = 0}' "$template" | head -3)
  prev=$(awk '$1 == "replaces:" {print $2}' <<<"$entry"); range=$(sed -n "s/^    skipRange: '\(.*\)'/\1/p" <<<"$entry")
  channel_add stable "$v" "${prev#"$pkg.v"}" "$range"
  if grep -q "^  - name: $pkg.v$v\$" "$community"; then
    entry=$(awk -v n="$pkg.v$v" '$0 == "  - name: " n {p = 1; print; next} p && /^    / {print; next} {p = 0}' "$community" | head -3)
    prev=$(awk '$1 == "replaces:" {print $2}' <<<"$entry")
    channel_add -t "$community" stable "$v" "${prev#"$pkg.v"}" "$range"
  fi
  echo "release: v$v promoted to stable in $template; rebuild the catalog (make catalog-build)"
  exit 0
fi

parse_opts "$@"
new=${ARGS[0]:-}; promote=${ARGS[1]:-}
usage="usage: $0 NEW_VERSION [--promote] [--registry HOST[:PORT] | --tags]   (MAJOR.MINOR.PATCH)"
[[ $new =~ $semver ]] && [ ${#ARGS[@]} -le 2 ] || die "$usage"
[ -z "$promote" ] || [ "$promote" = --promote ] || die "unknown option $promote"
[ -z "$TAGS" ] || [ -z "$REGISTRY" ] || die "--tags and --registry exclude each other"
[ -z "$(git status --porcelain)" ] || die "the work tree has changes: commit or stash them first"

cur=$(awk '$1 == "VERSION" && $2 == "?=" {print $3}' Makefile)
[ "$(printf '%s\n%s\n' "$cur" "$new" | sort -V | tail -1)" = "$new" ] && [ "$cur" != "$new" ] ||
  die "v$new is not after the current version v$cur"
oldest=$(awk '$1 == "-" && $2 == "name:" {sub("^'"$pkg"'.v", "", $3); print $3}' "$template" | sort -V | head -1)
range=">=$oldest <$new"
head=$(git rev-parse --short=7 HEAD)
created=${RELEASE_CREATED_AT:-$(date -u +%Y-%m-%dT00:00:00Z)}

# The digests first: nothing is written unless every image resolves. The bundle's images are the
# operator's and config/manager's RELATED_IMAGE_* values (checked after make bundle).
if [ -z "$TAGS" ]; then
  base=$(awk '$1 == "IMAGE_TAG_BASE" {print $3}' Makefile)
  mapfile -t images < <(awk '/- name: RELATED_IMAGE_/ {r = 1; next} r && $1 == "value:" {print $2} {r = 0}' config/manager/manager.yaml)
  digests resolve "$lock" "$base:v$new" "${images[@]}"
fi

for ch in candidate fast ${promote:+stable}; do channel_add "$ch" "$new" "$cur" "$range"; done
# The community catalogs: the previous release is replaced only where it was published.
community_prev=$cur
grep -q "^  - name: $pkg.v$cur\$" "$community" || community_prev=
for ch in candidate fast ${promote:+stable}; do channel_add -t "$community" "$ch" "$new" "$community_prev" "$range"; done
printf -- '- schema: olm.bundle\n  image: %s:%s\n' "$community_bundles" "$new" >> "$community"
sed -i -E "s/^(VERSION \?= ).*/\1$new/; s/^(RELEASES \?= .*)$/\1 $cur=$head/; s/^(BUNDLE_CREATED_AT \?= ).*/\1$created/" Makefile
sed -i -E "s/^(    olm.skipRange: ).*/\1'$range'/" "$csv"
# The CSV's replaces (read by tools outside file-based catalogs) names the previous release when the
# community catalogs have it, as the first release there, replacing nothing, has none.
sed -i '/^  replaces: /d' "$csv"
[ -z "$community_prev" ] || sed -i -E "s/^(  version: .*)$/  replaces: $pkg.v$cur\n\1/" "$csv"
printf -- '- schema: olm.bundle\n  image: %s:v%s\n' "$bundle_repo" "$new" >> "$template"

make --no-print-directory bundle
if [ -z "$TAGS" ]; then
  left=$(digests refs "bundle/manifests/$pkg.clusterserviceversion.yaml")
  [ -z "$left" ] || die "the bundle still names images by tag (add them to hack/release.sh's list): $left"
fi
go test ./test/bundle/ ./test/community/ -count=1
echo "release: v$new cut from v$cur (commit $head); review git diff, then: make verify-bundle catalog-build test-olm"
