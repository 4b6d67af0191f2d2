# shellcheck shell=bash
# OLM image sets of hack/images/build.sh (sourced by it: uses image, BUILT, BIN, TOOLS, IMAGES_CACHE).
#   olm        what OLM runs: its own image (olm, catalog, package-server, copy-content, cpb and a real
#              /bin/cp, which the catalog operator's util init containers call) and opm's
#   bundle     the bundle image of bundle/, with the operator image ($IMG, built too) pinned by digest
#   prev       the previous release, commit $PREV_COMMIT: its operator image, built from that commit's
#              tree, and its committed bundle/ (pinned the same way); cached by commit
#   releases   the same for every earlier release in $RELEASES (VERSION=COMMIT ..., oldest first)
#   catalog    the file-based catalog: catalog/templates rendered by opm against the bundle images of
#              every release and of this tree
#              (served from a loopback registry), validated, written to catalog/etcd-autopilot/ and
#              served by opm in the catalog image
#   next       for the OLM e2e only: the catalog once more, plus a synthetic next release (this tree's
#              bundle as version $NEXT_VERSION, default the next patch with "-e2e", replacing this
#              version in the stable channel; same operator image), which an e2e publishes by pointing
#              its CatalogSource at this catalog image: an operator upgrade to hold or let through
#   scorecard  operator-sdk's scorecard-test image and the custom tests in scorecard/
#   olmv1      OLM v1 (operator-controller and catalogd, hack/tools/operator-controller) and the image
#              registry it pulls catalogs and bundles from on the local cluster (crane's)
# OLM launches catalog, bundle and opm images itself and pulls any tag reference (policy Always), so
# bundles and catalogs name images by digest; `build.sh load` creates those digest references.

OLM_IMAGE=quay.io/operator-framework/olm:v0.42.0
OPM_IMAGE=quay.io/operator-framework/opm:v1.65.0
BUNDLE_REPO=${IMAGE_TAG_BASE:-ghcr.io/etcd-autopilot/etcd-autopilot}-bundle
CATALOG_REPO=${IMAGE_TAG_BASE:-ghcr.io/etcd-autopilot/etcd-autopilot}-catalog
PREV_VERSION=${PREV_VERSION:-0.1.0}
PREV_COMMIT=${PREV_COMMIT:-c48036b}
RELEASES=${RELEASES:-$PREV_VERSION=$PREV_COMMIT}
SCORECARD_TEST_IMAGE=quay.io/operator-framework/scorecard-test:v1.42.2
SCORECARD_UNTAR_IMAGE=localhost/scorecard-untar:v1.42.2
SCORECARD_CUSTOM_IMAGE=${IMAGE_TAG_BASE:-ghcr.io/etcd-autopilot/etcd-autopilot}-scorecard:v1

# digest_ref ARCHIVE: the repository@digest reference of an archive built by mkimage
digest_ref() {
  local idx; idx=$(tar -xOf "$1" index.json)
  jq -r '.manifests[0] | (.annotations["io.containerd.image.name"] | sub(":[^:/]*$"; "")) + "@" + .digest' <<<"$idx"
}
last_archive() { echo "${BUILT[${#BUILT[@]}-1]#* }"; }

rootfs_olm() {
  local b; mkdir -p "$1/bin"
  for b in olm catalog package-server copy-content cpb; do static_bin "$BIN/$b"; cp -L "$BIN/$b" "$1/bin/"; done
  static_bin /bin/busybox; cp /bin/busybox "$1/bin/cp"   # busybox runs the applet named by argv[0]
}
rootfs_opm() {
  mkdir -p "$1/bin"; static_bin "$BIN/opm"; static_bin "$BIN/grpc_health_probe"
  cp -L "$BIN/opm" "$BIN/grpc_health_probe" "$1/bin/"
}
set_olm() {
  "$TOOLS" olm opm grpc-health-probe >&2
  image "$OLM_IMAGE" rootfs_olm --entrypoint '["/bin/olm"]' --user 1001
  image "$OPM_IMAGE" rootfs_opm --entrypoint '["/bin/opm"]' --user 1001
}

# bundle_image DIR FROM TO [LOCK]: the bundle in DIR (manifests, metadata, tests) with image FROM replaced
# by TO in the CSV; labels from metadata/annotations.yaml, which the bundle format makes authoritative.
# A bundle a release pinned by digest (the digests of the published images, in its tree's
# config/manifests/image-digests.txt, or LOCK: hack/release.sh) gets the digests of this machine's builds of
# the same references instead (FROM's is TO), unless they are the same images.
BUNDLE_DIR= BUNDLE_FROM= BUNDLE_TO= BUNDLE_SEDS=()
rootfs_bundle() {
  cp -r "$BUNDLE_DIR/manifests" "$BUNDLE_DIR/metadata" "$BUNDLE_DIR/tests" "$1/"
  sed -i -e "s|$BUNDLE_FROM\$|$BUNDLE_TO|; s|$BUNDLE_FROM\([\"' ]\)|$BUNDLE_TO\1|g" "${BUNDLE_SEDS[@]}" \
    "$1"/manifests/*.clusterserviceversion.yaml
}
# local_digests LOCK CSV: BUNDLE_SEDS turning each pinned reference of LOCK that CSV names into the
# digest of the image built here under that reference (etcd's built first when needed)
local_digests() {
  local lock=$1 csv=$2 ref d to
  BUNDLE_SEDS=(-e '')
  [ -f "$lock" ] || return 0
  while read -r ref d; do
    grep -q "${ref%:*}@$d" "$csv" || continue
    if [ "$ref" = "$BUNDLE_FROM" ]; then
      to=$BUNDLE_TO
    else
      if [[ $ref == "$ETCD_IMAGE_REPO:"* ]] && ! built_archive "$ref" >/dev/null; then set_etcd; fi
      to=$(built_archive "$ref") || { echo "images: $csv pins $ref, which is not built here" >&2; exit 1; }
      to=$(digest_ref "$to")
    fi
    BUNDLE_SEDS+=(-e "s|${ref%:*}@$d|$to|g")
  done < "$lock"
}
built_archive() { # NAME: the archive last built under that name
  local line f=
  for line in "${BUILT[@]}"; do [ "${line%% *}" != "$1" ] || f=${line#* }; done
  [ -n "$f" ] && echo "$f"
}
bundle_image() {
  BUNDLE_DIR=$1 BUNDLE_FROM=$2 BUNDLE_TO=$3
  local v args=() l
  local_digests "${4:-$BUNDLE_DIR/../config/manifests/image-digests.txt}" "$(echo "$BUNDLE_DIR"/manifests/*.clusterserviceversion.yaml)"
  v=$(awk '$1 == "version:" && /^  version:/ {print $2}' "$BUNDLE_DIR"/manifests/*.clusterserviceversion.yaml)
  [ -n "$v" ] || { echo "images: no spec.version in $BUNDLE_DIR" >&2; exit 1; }
  while read -r l; do args+=(--label "$l"); done < <(
    awk '/^  [a-z]/ {k = $1; sub(/:$/, "", k); print k "=" $2}' "$BUNDLE_DIR/metadata/annotations.yaml")
  image "$BUNDLE_REPO:v$v" rootfs_bundle "${args[@]}"
}
set_bundle() {
  set_operator
  bundle_image "$repo/bundle" "$OPERATOR_IMAGE" "$(digest_ref "$(last_archive)")"
}

# A release: its operator image, tagged apart from everyone's working-tree builds of the same version.
# release_images VERSION COMMIT: that image, built from COMMIT's tree, and COMMIT's bundle/ pinned to it
release_images() {
  local version=$1 commit=$2 full src
  full=$(git -C "$repo" rev-parse --verify "$commit^{commit}")
  src=$IMAGES_CACHE/src-$full
  if [ ! -x "$src/bin/manager" ]; then
    say "building the manager of $commit (v$version)"
    rm -rf "$src.tmp"; mkdir -p "$src.tmp"
    git -C "$repo" archive "$full" | tar -x -C "$src.tmp"
    build_operator_bins "$src.tmp"
    rm -rf "$src"; mv "$src.tmp" "$src"
  fi
  OPERATOR_BINS=$src/bin
  image "${OPERATOR_IMAGE%:*}:v$version-$commit" rootfs_operator --entrypoint '["/manager"]' --user 65532:65532
  bundle_image "$src/bundle" "${OPERATOR_IMAGE%:*}:v$version" "$(digest_ref "$(last_archive)")"
}
set_prev() { release_images "$PREV_VERSION" "$PREV_COMMIT"; }
set_releases() { local r; for r in $RELEASES; do release_images "${r%%=*}" "${r#*=}"; done; }

# shellcheck source=../catalog-channel.sh
. "$repo/hack/catalog-channel.sh"

CATALOG_DIR=
rootfs_catalog() {
  rootfs_opm "$1"
  mkdir -p "$1/configs"; cp -r "$CATALOG_DIR"/. "$1/configs/"
}
# render_catalog ARCHIVE...: $CATALOG_TEMPLATES/*.yaml -> $CATALOG_OUT/<package>/catalog.yaml, each
# bundle tag reference in a template replaced by the digest of the bundle image built for it
CATALOG_TEMPLATES=$repo/catalog/templates CATALOG_OUT=$repo/catalog
# start_registry: a loopback registry (crane) in the background, on a free port; sets reg and pid.
# On a loaded machine its start can take seconds (CI's checks lane compiles beside it), and a random
# port may be taken: a few ports are tried, each given a minute, and a registry that never answers
# fails the build with its log (a silent failure here left the catalog's reference empty).
start_registry() {
  local attempt
  for attempt in 1 2 3; do
    reg=127.0.0.1:$((20000 + RANDOM % 20000))
    "$BIN/crane" registry serve --address "$reg" >"$stage/registry.log" 2>&1 & pid=$!
    # shellcheck disable=SC2064
    trap "kill $pid 2>/dev/null || true; rm -rf '$stage'" EXIT
    for _ in $(seq 600); do
      curl -sf "http://$reg/v2/" >/dev/null && return 0
      kill -0 "$pid" 2>/dev/null || break   # exited: most likely the port was taken
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    echo "images: the loopback registry on $reg did not answer (attempt $attempt of 3):" >&2
    cat "$stage/registry.log" >&2
  done
  exit 1
}
render_catalog() {
  local reg pid a ref tag d t out
  start_registry
  local seds=() pinned
  for a in "$@"; do
    ref=$(digest_ref "$a"); d=$stage/oci-${ref##*:}
    tag=$(tar -xOf "$a" index.json | jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]')
    mkdir -p "$d"; tar -xf "$a" -C "$d"
    "$BIN/crane" push "$d" "$reg/bundle:$tag" >"$stage/push.log" 2>&1 ||
      { echo "images: pushing $a to the loopback registry $reg failed:" >&2; cat "$stage/push.log" >&2; exit 1; }
    seds+=(-e "s|$BUNDLE_REPO:$tag\$|$reg/bundle@${ref#*@}|" -e "s|$BUNDLE_REPO@${ref#*@}\$|$reg/bundle@${ref#*@}|")
    # a bundle the template names by the digest its release published (hack/release.sh --pin-bundle):
    # this machine's build of it
    pinned=$(awk -v r="$BUNDLE_REPO:$tag" '$1 == r {print $2}' "$repo/config/manifests/image-digests.txt" 2>/dev/null || true)
    [ -z "$pinned" ] || seds+=(-e "s|$BUNDLE_REPO@$pinned\$|$reg/bundle@${ref#*@}|")
  done
  for t in "$CATALOG_TEMPLATES"/*.yaml; do
    out=$CATALOG_OUT/$(awk '$1 == "package:" {print $2; exit}' "$t")/catalog.yaml
    mkdir -p "$(dirname "$out")"
    sed "${seds[@]}" "$t" > "$stage/template.yaml"
    if grep -Eq "$BUNDLE_REPO[:@]" "$stage/template.yaml"; then
      echo "images: $t names a bundle that was not built: $(grep -E "$BUNDLE_REPO[:@]" "$stage/template.yaml")" >&2; exit 1
    fi
    # opm pulls through containers/image, which wants a signature policy: accept the loopback
    # registry's images (we just pushed them) via a HOME of its own, not the host's policy.
    mkdir -p "$stage/home/.config/containers"
    echo '{"default": [{"type": "insecureAcceptAnything"}]}' > "$stage/home/.config/containers/policy.json"
    HOME=$stage/home "$BIN/opm" alpha render-template basic "$stage/template.yaml" --use-http -o yaml \
        --migrate-level bundle-object-to-csv-metadata 2>"$stage/render.log" |
      sed "s|$reg/bundle@|$BUNDLE_REPO@|" > "$out.tmp" || { cat "$stage/render.log" >&2; exit 1; }
    mv "$out.tmp" "$out"
  done
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  trap 'rm -rf "$stage"' EXIT   # build.sh's own
  "$BIN/opm" validate "$CATALOG_OUT"
  say "rendered and validated $CATALOG_OUT from $CATALOG_TEMPLATES"
}
bundle_version() { awk '$1 == "version:" && /^  version:/ {print $2}' "$1"/manifests/*.clusterserviceversion.yaml; }
# catalog_bundles FN: the archives of every release's bundle and this tree's, after FN (which may add
# more bundles) has run
catalog_bundles() {
  local n=${#BUILT[@]} i
  set_releases; set_bundle; "$1"
  CATALOG_BUNDLES=()
  for ((i = n; i < ${#BUILT[@]}; i++)); do
    [[ ${BUILT[i]} == "$BUNDLE_REPO:"* ]] && CATALOG_BUNDLES+=("${BUILT[i]#* }")
  done
}
# catalog_image TAG: the catalog in $CATALOG_DIR served by opm
catalog_image() {
  # opm builds its cache at start (a few bundles: instant) in /tmp, writable by the non-root user; a
  # cache built into the image would be owned by root here (mkimage writes every file as 0:0).
  image "$CATALOG_REPO:$1" rootfs_catalog --entrypoint '["/bin/opm"]' \
    --cmd '["serve","/configs","--cache-dir=/tmp/cache","--cache-enforce-integrity=false"]' --user 1001 \
    --label operators.operatorframework.io.index.configs.v1=/configs
}
set_catalog() {
  "$TOOLS" opm crane grpc-health-probe >&2
  catalog_bundles true
  render_catalog "${CATALOG_BUNDLES[@]}"
  CATALOG_DIR=$repo/catalog
  catalog_image "v$(bundle_version "$repo/bundle")"
}

# The synthetic next release: this tree's bundle renamed to $NEXT_VERSION, replacing this version.
next_bundle() {
  local cur operator next=$stage/next-bundle csv
  cur=$(bundle_version "$repo/bundle")
  operator=$(digest_ref "$(awk -v r="$OPERATOR_IMAGE" '$1 == r {print $2}' <<<"$(printf '%s\n' "${BUILT[@]}")" | tail -1)")
  rm -rf "$next"; cp -r "$repo/bundle" "$next"
  csv=$(echo "$next"/manifests/*.clusterserviceversion.yaml)
  sed -i -E "s/^(  name: $NEXT_PKG\.v)$cur\$/\1$NEXT_VERSION/; s/^(  version: )$cur\$/\1$NEXT_VERSION/;
    s/^(  replaces: ).*/\1$NEXT_PKG.v$cur/; /^    olm\.skipRange: /d" "$csv"
  [ "$(bundle_version "$next")" = "$NEXT_VERSION" ] && grep -q "^  name: $NEXT_PKG.v$NEXT_VERSION\$" "$csv" ||
    { echo "images: could not make the v$NEXT_VERSION bundle from $csv" >&2; exit 1; }
  bundle_image "$next" "$OPERATOR_IMAGE" "$operator" "$repo/config/manifests/image-digests.txt"
}
NEXT_PKG=etcd-autopilot
set_next() {
  "$TOOLS" opm crane grpc-health-probe >&2
  local cur; cur=$(bundle_version "$repo/bundle")
  NEXT_VERSION=${NEXT_VERSION:-${cur%.*}.$(( ${cur##*.} + 1 ))-e2e}
  catalog_bundles next_bundle
  CATALOG_TEMPLATES=$stage/next-templates CATALOG_OUT=$stage/next-catalog
  mkdir -p "$CATALOG_TEMPLATES"; cp "$repo"/catalog/templates/*.yaml "$CATALOG_TEMPLATES/"
  add_to_channel "$CATALOG_TEMPLATES/$NEXT_PKG.yaml" "$NEXT_PKG" stable "$NEXT_VERSION" "$cur" ||
    { echo "images: cannot add v$NEXT_VERSION to the stable channel of catalog/templates/$NEXT_PKG.yaml" >&2; exit 1; }
  printf -- '- schema: olm.bundle\n  image: %s:v%s\n' "$BUNDLE_REPO" "$NEXT_VERSION" >> "$CATALOG_TEMPLATES/$NEXT_PKG.yaml"
  render_catalog "${CATALOG_BUNDLES[@]}"
  CATALOG_DIR=$CATALOG_OUT
  catalog_image "v$NEXT_VERSION"
  CATALOG_TEMPLATES=$repo/catalog/templates CATALOG_OUT=$repo/catalog
}

OLMV1_CONTROLLER_IMAGE=quay.io/operator-framework/operator-controller:v1.5.1
OLMV1_CATALOGD_IMAGE=quay.io/operator-framework/catalogd:v1.5.1
rootfs_olmv1_controller() { static_bin "$BIN/operator-controller"; cp -L "$BIN/operator-controller" "$1/"; }
rootfs_olmv1_catalogd() { static_bin "$BIN/catalogd"; cp -L "$BIN/catalogd" "$1/"; }
rootfs_registry() { static_bin "$BIN/crane"; mkdir -p "$1/usr/local/bin"; cp -L "$BIN/crane" "$1/usr/local/bin/"; }
set_olmv1() {
  "$TOOLS" operator-controller crane >&2
  image "$OLMV1_CONTROLLER_IMAGE" rootfs_olmv1_controller --entrypoint '["/operator-controller"]' --user 65532:65532
  image "$OLMV1_CATALOGD_IMAGE" rootfs_olmv1_catalogd --entrypoint '["/catalogd"]' --user 65532:65532
  image "$REGISTRY_IMAGE" rootfs_registry --entrypoint '["/usr/local/bin/crane", "registry", "serve"]' --user 65532:65532
}

rootfs_scorecard_test() {
  mkdir -p "$1/usr/local/bin" "$1/opt/scorecard-test"
  static_bin "$BIN/scorecard-test"; cp -L "$BIN/scorecard-test" "$1/usr/local/bin/"
}
SCORECARD_BIN=
rootfs_scorecard_custom() { mkdir -p "$1/usr/local/bin"; cp "$SCORECARD_BIN" "$1/usr/local/bin/etcd-autopilot-scorecard"; }
set_scorecard() {
  "$TOOLS" scorecard-test >&2
  # the untar init container runs `tar xvzf` as a non-root user (scorecard --pod-security=restricted)
  image "$SCORECARD_UNTAR_IMAGE" rootfs_busybox --user 1001
  image "$SCORECARD_TEST_IMAGE" rootfs_scorecard_test --entrypoint '["/usr/local/bin/scorecard-test"]' \
    --workdir /opt/scorecard-test --env HOME=/opt/scorecard-test --user 1001
  say "go build scorecard/"
  SCORECARD_BIN=$stage/etcd-autopilot-scorecard
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$SCORECARD_BIN" ./scorecard)
  image "$SCORECARD_CUSTOM_IMAGE" rootfs_scorecard_custom --entrypoint '["/usr/local/bin/etcd-autopilot-scorecard"]' --user 1001
}
