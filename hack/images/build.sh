#!/usr/bin/env bash
# Daemonless image builds for the local cluster (hack/cluster): every image is one layer built
# from static binaries by hack/images/mkimage (no base image, no Docker, no registry).
#
#   hack/images/build.sh build [SET...]   write the OCI archives (no-op for unchanged content)
#   hack/images/build.sh load  [SET...]   build, then import into the cluster's containerd,
#                                          skipping images already there with the same digest
#                                          (every node's; LOAD_SOCKET=PATH: that containerd's only)
#   hack/images/build.sh list  [SET...]   print "NAME ARCHIVE" of the (built) archives
#   hack/images/build.sh refs  [SET...]   print "NAME DIGEST-REFERENCE" of the (built) archives
# SETs: all (default) = system etcd operator test
#   system   = pause busybox coredns local-path-provisioner csi-provisioner csi-resizer
#              (what hack/cluster/up.sh loads)
#   test     = minio (S3 storage for the backup e2e tests and benchmarks, hack/minio)
#   etcd     = gcr.io/etcd-development/etcd:{v3.5.35,v3.6.16,v3.7.3}
#   netpol   = registry.k8s.io/e2e-test-images/agnhost:2.56 (the upstream NetworkPolicy e2e tests' only image,
#              from static bin/agnhost: make test-netpol-upstream; not in all)
#   operator = $IMG (default ghcr.io/etcd-autopilot/etcd-autopilot:v0.2.0), an image index of one
#              image per platform in OPERATOR_PLATFORMS (linux/amd64 linux/arm64), each from static
#              bin/linux-<arch>/manager and worker (cmd/worker: the backup and restore work), cross-compiled
#   OLM sets (hack/images/olm.sh): olm, bundle, prev, releases, catalog, next, scorecard, olmv1
# Archives: $IMAGES_CACHE/<name>-<tag>-<contenthash>.tar (default ~/.cache/etcd-autopilot/images),
# outside the work tree, so a fresh clone on the same machine rebuilds nothing.
# Env: IMG, CLUSTER_DIR (default <repo>/.cluster), IMAGES_CACHE, BIN (default <repo>/bin)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=images.sh
. "$here/images.sh"
BIN=${BIN:-$repo/bin}
TOOLS=$repo/hack/tools/build.sh
IMAGES_CACHE=${IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-autopilot/images}
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
mkdir -p "$IMAGES_CACHE"
stage=$(mktemp -d "$IMAGES_CACHE/.stage.XXXXXX"); trap 'rm -rf "$stage"' EXIT
say() { echo "images: $*" >&2; }

# --- rootfs builders ---------------------------------------------------------------------------
base_rootfs() { # dir: /etc/passwd, /etc/group, /tmp (1777); no shell anywhere
  mkdir -p "$1/etc" "$1/tmp"; chmod 1777 "$1/tmp"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > "$1/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' 'nonroot:x:65532:' > "$1/etc/group"
}
static_bin() { # file: refuse dynamically linked binaries (no loader in a FROM-nothing image)
  file -L "$1" | grep -Eq 'statically linked|static-pie linked' || { echo "images: $1 is not a static binary" >&2; exit 1; }
}
rootfs_pause()   { static_bin "$BIN/pause"; cp -L "$BIN/pause" "$1/pause"; }
rootfs_coredns() { static_bin "$BIN/coredns"; cp -L "$BIN/coredns" "$1/coredns"; }
rootfs_lpp()     { static_bin "$BIN/local-path-provisioner"; mkdir -p "$1/usr/bin"; cp -L "$BIN/local-path-provisioner" "$1/usr/bin/"; }
rootfs_busybox() { # Debian's busybox-static and its applet links (local-path's helper pods, tests)
  local bb=/bin/busybox a; static_bin "$bb"
  mkdir -p "$1/bin" "$1/sbin" "$1/usr/bin" "$1/usr/sbin"; cp "$bb" "$1/bin/busybox"
  for a in $("$bb" --list-full); do [ -e "$1/$a" ] || ln -s /bin/busybox "$1/$a"; done
  sed -i 's|/sbin/nologin|/bin/sh|' "$1/etc/passwd"
}
ETCD_DIR=
rootfs_etcd() { # etcd, etcdctl, etcdutl of one release from $ETCD_DIR
  local b; mkdir -p "$1/usr/local/bin" "$1/var/etcd" "$1/var/lib/etcd"
  for b in etcd etcdctl etcdutl; do static_bin "$ETCD_DIR/$b"; cp -L "$ETCD_DIR/$b" "$1/usr/local/bin/"; done
}
rootfs_csi_provisioner() { static_bin "$BIN/csi-provisioner"; cp -L "$BIN/csi-provisioner" "$1/csi-provisioner"; }
rootfs_csi_resizer()     { static_bin "$BIN/csi-resizer"; cp -L "$BIN/csi-resizer" "$1/csi-resizer"; }
rootfs_agnhost() { # /agnhost as upstream's image has it (its pods run /agnhost ...), and agnhost-2 beside it
  static_bin "$BIN/agnhost"; cp -L "$BIN/agnhost" "$1/agnhost"; ln -s agnhost "$1/agnhost-2"
}
rootfs_minio()   { static_bin "$BIN/minio"; mkdir -p "$1/usr/bin"; cp -L "$BIN/minio" "$1/usr/bin/"; }
OPERATOR_BINS= # a bin/ directory with manager and, from v0.2.0 on, worker
rootfs_operator() { # dir [os/arch]: with a platform, from OPERATOR_BINS/<os>-<arch>
  local b bins=$OPERATOR_BINS
  [ -z "${2:-}" ] || bins=$OPERATOR_BINS/${2/\//-}
  for b in manager worker; do
    [ -e "$bins/$b" ] || continue
    static_bin "$bins/$b"; cp -L "$bins/$b" "$1/$b"
  done
}
# build_operator_bins TREE [OS/ARCH]: the operator's binaries of a source tree into TREE/bin, or
# cross-compiled into TREE/bin/<os>-<arch> (releases before cmd/worker have the manager only).
# A clean tree's build is stamped with its commit, platform and Go version (TREE/<out>/.built) and not
# repeated: make test asks for the operator's images about a dozen times (each set and each `refs`),
# and even an up-to-date `go build` of the two binaries for two platforms takes ~4 s. A tree with
# changes, tracked or untracked, is always built.
build_operator_bins() {
  local out=bin goos goarch stamp=
  goos=$(go env GOOS) goarch=$(go env GOARCH)
  if [ -n "${2:-}" ]; then out=bin/${2/\//-} goos=${2%/*} goarch=${2#*/}; fi
  if [ -z "$(git -C "$1" status --porcelain 2>/dev/null || echo unknown)" ]; then
    stamp="$(git -C "$1" rev-parse HEAD) $goos/$goarch $(go version) ${GOFLAGS:-}"
    if [ -f "$1/$out/manager" ] && [ "$(cat "$1/$out/.built" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  fi
  rm -f "$1/$out/.built"
  # (releases before the go/v4 layout have the manager's main package at the root)
  (cd "$1" && main=. && if [ -d cmd/manager ]; then main=./cmd/manager; fi && export CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch &&
    go build -trimpath -ldflags "-s -w" -o "$out/manager" "$main" &&
    if [ -d cmd/worker ]; then go build -trimpath -ldflags "-s -w" -o "$out/worker" ./cmd/worker; fi) || return 1
  if [ -n "$stamp" ]; then echo "$stamp" > "$1/$out/.built"; fi
}

# --- image NAME ROOTFS_FN MKIMAGE_ARGS... : archive in the cache, keyed by its content -----------
# With PLATFORMS set ("linux/amd64 linux/arm64"), an image index: ROOTFS_FN runs once per platform
# (DIR OS/ARCH) and mkimage gets a --rootfs OS/ARCH=DIR for each.
BUILT=()   # "name archive"
PLATFORMS=
layer_of() { # dir: the exact layer mkimage would write
  (cd "$1" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar --mtime=@0 --owner=0 --group=0 --numeric-owner --no-recursion --verbatim-files-from -T - -cf -)
}
image() {
  local name=$1 fn=$2; shift 2
  local r=$stage/rootfs h file prefix old p roots=()
  rm -rf "$r"*
  if [ -z "$PLATFORMS" ]; then
    mkdir -p "$r"; base_rootfs "$r"; "$fn" "$r"; roots=("$r")
  else
    for p in $PLATFORMS; do
      mkdir -p "$r-${p/\//-}"; base_rootfs "$r-${p/\//-}"; "$fn" "$r-${p/\//-}" "$p"
      roots+=(--rootfs "$p=$r-${p/\//-}")
    done
  fi
  # the key: mkimage itself, its arguments and the exact layers it would write
  h=$({ cat "$here/mkimage"; printf '%s\n' "$name" "$@" $PLATFORMS
        if [ -z "$PLATFORMS" ]; then layer_of "$r"; else for p in $PLATFORMS; do layer_of "$r-${p/\//-}"; done; fi; } |
      sha256sum | cut -c1-16)
  prefix=$IMAGES_CACHE/${name//[\/:]/_}
  prefix=${prefix%_*}-${name##*:}-   # <name>-<tag>-
  file=$prefix$h.tar
  if [ ! -f "$file" ]; then
    "$here/mkimage" "$name" "${roots[@]}" --out "$file" "$@" >/dev/null
    for old in "$prefix"????????????????.tar; do [ "$old" = "$file" ] || rm -f "$old"; done
    say "built $name -> $file"
  fi
  BUILT+=("$name $file")
}

set_system() {
  "$TOOLS" pause coredns local-path-provisioner csi >&2
  image "$PAUSE_IMAGE"   rootfs_pause   --entrypoint '["/pause"]'
  image "$BUSYBOX_IMAGE" rootfs_busybox --cmd '["sh"]'
  image "$COREDNS_IMAGE" rootfs_coredns --entrypoint '["/coredns"]'
  image "$LPP_IMAGE"     rootfs_lpp     --entrypoint '["/usr/bin/local-path-provisioner"]'
  image "$CSI_PROVISIONER_IMAGE" rootfs_csi_provisioner --entrypoint '["/csi-provisioner"]'
  image "$CSI_RESIZER_IMAGE"     rootfs_csi_resizer     --entrypoint '["/csi-resizer"]'
}
set_etcd() {
  local v tools=() minor got
  for v in $ETCD_IMAGE_VERSIONS; do minor=${v%.*}; tools+=("etcd-$minor"); done
  "$TOOLS" "${tools[@]}" >&2
  for v in $ETCD_IMAGE_VERSIONS; do
    minor=${v%.*}
    # hack/tools/build.sh links etcd-v3.6 into bin/ and the other releases into bin/etcd-vX.Y/
    if [ "$minor" = v3.6 ]; then ETCD_DIR=$BIN; else ETCD_DIR=$BIN/etcd-$minor; fi
    got=v$("$ETCD_DIR/etcd" --version | sed -n 's/^etcd Version: //p')
    [ "$got" = "$v" ] || { echo "images: $ETCD_DIR/etcd is $got, want $v (update hack/images/images.sh or hack/tools/etcd-$minor)" >&2; exit 1; }
    image "$ETCD_IMAGE_REPO:$v" rootfs_etcd --entrypoint '["/usr/local/bin/etcd"]'
  done
}
set_test() {
  "$TOOLS" minio >&2
  image "$MINIO_IMAGE" rootfs_minio --entrypoint '["/usr/bin/minio"]' --user 65532:65532
}
set_netpol() {
  "$TOOLS" e2e-test >&2
  # upstream's entrypoint and default command (test/images/agnhost/Dockerfile)
  image "$AGNHOST_IMAGE" rootfs_agnhost --entrypoint '["/agnhost"]' --cmd '["pause"]'
}
set_operator() {
  [[ ${OPERATOR_IMAGE##*/} == *:?* ]] || { echo "images: IMG=$OPERATOR_IMAGE needs an explicit tag" >&2; exit 2; }
  local p host
  host=$(go env GOOS)/$(go env GOARCH)
  for p in $OPERATOR_PLATFORMS; do
    say "go build bin/${p/\//-}/manager bin/${p/\//-}/worker (GOOS=${p%/*} GOARCH=${p#*/})"
    build_operator_bins "$repo" "$p"
  done
  # bin/manager and bin/worker: the host's (what make build writes; benchmarks run bin/worker)
  if [[ " $OPERATOR_PLATFORMS " == *" $host "* ]]; then
    cp "$repo/bin/${host/\//-}/manager" "$repo/bin/${host/\//-}/worker" "$repo/bin/"
  else
    build_operator_bins "$repo"
  fi
  OPERATOR_BINS=$repo/bin
  PLATFORMS=$OPERATOR_PLATFORMS
  image "$OPERATOR_IMAGE" rootfs_operator --entrypoint '["/manager"]' --user 65532:65532
  PLATFORMS=
}

# shellcheck source=olm.sh
. "$here/olm.sh"

build_sets() {
  local s
  [ $# -gt 0 ] || set -- all
  for s in "$@"; do
    case $s in
      all) set_system; set_etcd; set_operator; set_test ;;
      system|etcd|operator|test|netpol|olm|bundle|prev|releases|catalog|next|scorecard|olmv1) "set_$s" ;;
      *) echo "images: unknown set $s (all|system|etcd|operator|test|netpol|olm|bundle|prev|releases|catalog|next|scorecard|olmv1)" >&2; exit 2 ;;
    esac
  done
}

# load imports the built images into every node's containerd: the first node's, and those of the nodes
# hack/cluster/up.sh adds with NODES > 1 (CLUSTER_DIR/nodes/K), which pull from no registry either.
# LOAD_SOCKET=PATH: into that one containerd only (up.sh, for a node whose containerd it just started).
load() {
  if [ -n "${LOAD_SOCKET:-}" ]; then load_into "$LOAD_SOCKET"; return 0; fi
  local sock=$CLUSTER_DIR/containerd/containerd.sock
  [ -S "$sock" ] && ctr -a "$sock" version >/dev/null 2>&1 ||
    { echo "images: no containerd at $sock: start the cluster (hack/cluster/up.sh)" >&2; exit 1; }
  # every node's containerd at once: an import is mostly one core's decompression and disk writes
  local pids=() pid
  load_into "$sock" & pids+=($!)
  for sock in "$CLUSTER_DIR"/nodes/*/containerd/containerd.sock; do
    [ -S "$sock" ] && ctr -a "$sock" version >/dev/null 2>&1 || continue
    load_into "$sock" & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "images: loading into a node's containerd failed" >&2; exit 1; }; done
}

load_into() { # containerd socket
  local sock=$1 have line name file idx want ref cur
  # capture first: `ctr ... | grep -q` under pipefail can fail by SIGPIPE
  have=$(ctr -a "$sock" -n k8s.io images ls)
  for line in "${BUILT[@]}"; do
    name=${line%% *} file=${line#* }
    idx=$(tar -xOf "$file" index.json)
    want=$(jq -r '.manifests[0].digest' <<<"$idx")
    ref=$(jq -r '.manifests[0].annotations["io.containerd.image.name"]' <<<"$idx")
    cur=$(awk -v r="$ref" '$1 == r {print $3}' <<<"$have")
    if [ "$cur" != "$want" ]; then
      ctr -a "$sock" -n k8s.io images import "$file" >/dev/null
      say "loaded $ref ($want)"
    fi
    # Also under its digest reference: OLM gives every tag reference it launches (catalog, bundle
    # and opm pods) imagePullPolicy Always, which fails without a registry; a digest is IfNotPresent.
    if ! awk -v r="${ref%:*}@$want" '$1 == r {f = 1} END {exit !f}' <<<"$have"; then
      ctr -a "$sock" -n k8s.io images tag --force "$ref" "${ref%:*}@$want" >/dev/null
    fi
  done
}

cmd=${1:-build}; [ $# -gt 0 ] && shift
case $cmd in
  build) build_sets "$@" ;;
  list) build_sets "$@"; printf '%s\n' "${BUILT[@]}" ;;
  refs) build_sets "$@"; for line in "${BUILT[@]}"; do echo "${line%% *} $(digest_ref "${line#* }")"; done ;;
  load) build_sets "$@"; load ;;
  *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
