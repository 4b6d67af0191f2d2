#!/usr/bin/env bash
# Image digests of a release. hack/release.sh records them in config/manifests/image-digests.txt
# ("REFERENCE DIGEST" lines, REFERENCE a tag reference), and make bundle pins the CSV with them.
#
#   hack/digests.sh resolve LOCK REF...   look up the digest of each tag reference (crane digest: of the
#                                         image index for a multi-platform image) and record it in LOCK,
#                                         replacing an earlier line of the same REF; LOCK is written only
#                                         when every REF resolved, and a missing image is named
#   hack/digests.sh pin LOCK FILE...      every REF of LOCK in FILEs becomes REPOSITORY@DIGEST; a FILE
#                                         that is a CSV then gets features.operators.openshift.io/
#                                         disconnected "true" when every image it names is a digest,
#                                         "false" otherwise (a missing LOCK pins nothing)
#   hack/digests.sh refs CSV              the tag references a CSV names, one a line
# REGISTRY=HOST[:PORT] (resolve): look each image up there, under its path without the registry
# (ghcr.io/etcd-autopilot/etcd-autopilot:v1 as HOST/etcd-autopilot/etcd-autopilot:v1), plain HTTP
# allowed: a mirror laid out the way containerd's hosts.toml and registries.conf mirrors are, such as
# the local cluster's registry (hack/registry.sh). Unset: each image's own registry.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CRANE=${CRANE:-$here/../bin/crane}
die() { echo "digests: $*" >&2; exit 1; }
digest_re='@sha256:[0-9a-f]{64}$'

# csv_images CSV: every image reference a CSV names (containers, RELATED_IMAGE_* values, relatedImages,
# the containerImage annotation)
csv_images() {
  awk '
    /^ *(- )?(image|containerImage): / { sub(/^ *(- )?(image|containerImage): */, ""); gsub(/["\047]/, ""); print; next }
    /^ *- name: RELATED_IMAGE_/ { rel = 1; next }
    rel && /^ *value: / { sub(/^ *value: */, ""); gsub(/["\047]/, ""); print }
    { rel = 0 }
  ' "$1" | sort -u
}

resolve() {
  local lock=$1 ref where d failed=0; shift
  tmp=$(mktemp); trap 'rm -f "$tmp" "$tmp.new"' EXIT
  [ ! -f "$lock" ] || cp "$lock" "$tmp"
  for ref in "$@"; do
    [[ ${ref%%/*} == *[.:]* && ${ref##*/} == *:* && $ref != *@* ]] ||
      die "$ref: want a tag reference with its registry (host/path:tag)"
    where=$ref
    [ -z "${REGISTRY:-}" ] || where=$REGISTRY/${ref#*/}
    if ! d=$("$CRANE" digest ${REGISTRY:+--insecure} "$where" 2>&1); then
      echo "digests: no image $ref${REGISTRY:+ in $REGISTRY (as $where)}: ${d##*$'\n'}" >&2
      failed=1; continue
    fi
    [[ $d =~ ^sha256:[0-9a-f]{64}$ ]] || die "$where: unexpected digest '$d'"
    awk -v r="$ref" '$1 != r' "$tmp" > "$tmp.new"; echo "$ref $d" >> "$tmp.new"; mv "$tmp.new" "$tmp"
    echo "digests: $ref -> $d" >&2
  done
  [ "$failed" = 0 ] || die "$lock left as it was: resolve every image first"
  LC_ALL=C sort -o "$tmp" "$tmp"
  mv "$tmp" "$lock"
}

pin() {
  local lock=$1 f ref d esc seds=() tags; shift
  if [ -f "$lock" ]; then
    while read -r ref d; do
      [ -n "$ref" ] || continue
      esc=$(printf '%s' "$ref" | sed 's/[][\.*^$|]/\\&/g')
      # the reference ends the value: end of line, a quote or a space
      seds+=(-e "s|$esc\$|${ref%:*}@$d|" -e "s|$esc\([\"' ]\)|${ref%:*}@$d\1|g")
    done < "$lock"
  fi
  for f in "$@"; do
    [ ${#seds[@]} -eq 0 ] || sed -i "${seds[@]}" "$f"
    grep -q '^kind: ClusterServiceVersion$' "$f" || continue
    tags=$(csv_images "$f" | grep -Ev -- "$digest_re" || true)
    grep -q '^    features.operators.openshift.io/disconnected: ' "$f" ||
      die "$f: no features.operators.openshift.io/disconnected annotation to set"
    sed -i -E "s|^(    features.operators.openshift.io/disconnected: ).*|\1\"$([ -z "$tags" ] && echo true || echo false)\"|" "$f"
  done
}

cmd=${1:-}; [ $# -gt 0 ] && shift
case $cmd in
  resolve) [ $# -ge 2 ] || die "usage: $0 resolve LOCK REF..."; resolve "$@" ;;
  pin) [ $# -ge 2 ] || die "usage: $0 pin LOCK FILE..."; pin "$@" ;;
  refs) [ $# -eq 1 ] || die "usage: $0 refs CSV"; csv_images "$1" | grep -Ev -- "$digest_re" || true ;;
  *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
