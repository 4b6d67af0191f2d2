#!/usr/bin/env bash
# hack/release-rehearsal.sh REGISTRY [NEW_VERSION]: the release flow of docs/dev/release.md against
# REGISTRY (HOST:PORT, standing in for ghcr.io and gcr.io: images under their paths without the
# registry host, as the local cluster's registry holds them), in a scratch worktree of HEAD, for the
# release e2e (test/release). NEW_VERSION defaults to the next minor version.
#   1. this machine's builds of the images the release names (the operator at vNEW_VERSION, every
#      supported etcd release under upstream's name) are pushed to REGISTRY;
#   2. hack/release.sh NEW_VERSION --promote --registry REGISTRY: digests resolved there, the bundle
#      rendered pinned, then committed in the scratch worktree;
#   3. the bundle image built from that bundle and pushed; hack/release.sh --pin-bundle names it by
#      digest in the catalog template; committed;
#   4. the catalog image built (every earlier release, and this one) and pushed with its bundles.
# Prints on stdout: version=NEW_VERSION, catalog=<the catalog image by digest>, and each digest line of
# the release's config/manifests/image-digests.txt as "digest=REFERENCE DIGEST". The worktree is
# removed at the end (KEEP_REHEARSAL=1 keeps it). Commits only in the scratch worktree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
reg=${1:?usage: $0 REGISTRY [NEW_VERSION]}
export PATH=$repo/bin:$PATH GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
say() { echo "rehearsal: $*" >&2; }
mkvar() { awk -v k="$1" '$1 == k && ($2 == "?=" || $2 == ":=") {sub(/^[^=]*= */, ""); print; exit}' "${2:-Makefile}"; }

cd "$repo"
cur=$(mkvar VERSION)
new=${2:-$(echo "$cur" | awk -F. '{print $1 "." $2 + 1 ".0"}')}
base=$(mkvar IMAGE_TAG_BASE)
scratch=$(mktemp -d); work=$scratch/tree
cleanup() {
  [ -n "${KEEP_REHEARSAL:-}" ] && { say "kept $work"; return; }
  git -C "$repo" worktree remove --force "$work" 2>/dev/null || true; rm -rf "$scratch"
}
trap cleanup EXIT
git worktree add -q --detach "$work" HEAD
# the tools, linked into an ignored bin/ directory (a bin symlink would be an untracked file); not the
# operator's binaries, which the image builds write (they would write through a link into this tree)
mkdir "$work/bin"
for f in "$repo"/bin/*; do
  case ${f##*/} in manager|worker) continue ;; esac
  [ ! -f "$f" ] || ln -s "$f" "$work/bin/"
done
cd "$work"
git() { command git -c user.name=rehearsal -c user.email=rehearsal@localhost "$@"; }
push() { PUSH_TO=$reg hack/registry-push.sh >&2; }

say "1. the images v$new names, into $reg"
IMG=$base:v$new hack/images/build.sh list operator etcd | push

say "2. hack/release.sh $new --promote --registry $reg"
hack/release.sh "$new" --promote --registry "$reg" >&2
git add -A; git commit -qm "release v$new (rehearsal)"

say "3. the bundle image, pinned in the catalog template"
IMG=$base:v$new hack/images/build.sh list bundle | grep -- "-bundle:v$new " | push
hack/release.sh --pin-bundle "$new" --registry "$reg" >&2
git commit -qam "catalog: the v$new bundle by digest (rehearsal)"

say "4. the catalog image"
releases=$(mkvar RELEASES); prev=${releases##* }
IMG=$base:v$new IMAGE_TAG_BASE=$base RELEASES=$releases PREV_VERSION=${prev%%=*} PREV_COMMIT=${prev#*=} \
  hack/images/build.sh list catalog | grep -E -- '-(bundle|catalog):' | push
d=$(crane digest --insecure "$reg/${base#*/}-catalog:v$new")
echo "version=$new"
echo "catalog=$base-catalog@$d"
sed 's/^/digest=/' config/manifests/image-digests.txt
