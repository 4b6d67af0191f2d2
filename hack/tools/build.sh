#!/usr/bin/env bash
# Builds pinned tools from the Go module proxy, one Go module per tool (hack/tools/<tool>/go.mod),
# so each tool links exactly the dependency set its upstream pins.
#
# Binaries go to a cache outside the work tree, keyed by the tool's go.mod/go.sum and this
# script, so a fresh clone on the same machine (CI) rebuilds nothing:
#   $TOOLS_CACHE/<tool>-<key>/...   (default ~/.cache/etcd-autopilot/tools)
# and are linked into $BIN (default <repo>/bin).
#
# Usage: hack/tools/build.sh TOOL...     (see the build_* functions for the names)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BIN=${BIN:-$repo/bin}
TOOLS_CACHE=${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-autopilot/tools}
mkdir -p "$BIN" "$TOOLS_CACHE"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
# sum.golang.org, as reached through this proxy, has no entries for some modules.
export GONOSUMDB=${GONOSUMDB:-github.com/rancher/local-path-provisioner,sigs.k8s.io/cri-tools,github.com/operator-framework/operator-controller}

K8S_VERSION=v1.34.4
K8S_DATE=2026-02-10T12:53:36Z   # the module's time on the proxy (its .info carries no commit)

# key TOOL -> short hash of what determines the binaries: the module files and the build recipe
key() {
  { cat "$here/$1/go.mod" "$here/$1/go.sum" "$here/$1"/*/*.go 2>/dev/null; declare -f gobuild build_etcd_release "build_${1//[-.]/_}"; echo "$K8S_VERSION $K8S_DATE"; } |
    sha256sum | cut -c1-12
}

# ensure TOOL BINARY... : build TOOL unless its cache entry is complete, then link its binaries
ensure() {
  local tool=$1; shift
  local out="$TOOLS_CACHE/$tool-$(key "$tool")" b missing=0
  for b in "$@"; do [ -x "$out/$b" ] || missing=1; done
  if [ $missing = 1 ]; then
    echo ">> building $tool into $out" >&2
    local tmp="$out.tmp.$$"; rm -rf "$tmp"; mkdir -p "$tmp"
    (cd "$here/$tool" && "build_${tool//[-.]/_}" "$tmp")
    rm -rf "$out"; mv "$tmp" "$out"
  fi
  mkdir -p "$BIN"
  # a link already right is left alone: `make test` runs two lanes that both ensure the same tools, and a
  # relink would take the binary away from the other lane for a moment
  for b in "$@"; do [ "$(readlink "$BIN/$b" 2>/dev/null)" = "$out/$b" ] || ln -sfn "$out/$b" "$BIN/$b"; done
}

gobuild() { go build -trimpath "$@"; }

build_kubernetes() {
  local ld="-s -w" p minor
  minor=$(cut -d. -f2 <<<"${K8S_VERSION#v}")
  # Without version stamping the server reports v0.0.0-master, which kubectl and OLM reject.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$K8S_DATE"
  done
  gobuild -ldflags "$ld" -o "$1/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
    k8s.io/kubernetes/cmd/kubectl
}

# etcd-vX.Y: etcd, etcdctl, etcdutl of one release (etcd's own go.mod uses replace, so a wrapper module)
build_etcd_release() {
  local v; v=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
  gobuild -ldflags "-s -w" -o "$1/" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3 go.etcd.io/etcd/etcdutl/v3
  # go build names server/v3 "server"
  mv "$1/server" "$1/etcd"
  echo "$v" > "$1/VERSION"
}
build_etcd_v3_5() { build_etcd_release "$@"; }
build_etcd_v3_6() { build_etcd_release "$@"; }
build_etcd_v3_7() { build_etcd_release "$@"; }

build_controller_gen() { gobuild -ldflags "-s -w" -o "$1/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen; }
build_kustomize() { gobuild -ldflags "-s -w" -o "$1/kustomize" sigs.k8s.io/kustomize/kustomize/v5; }
build_golangci_lint() { gobuild -ldflags "-s -w" -o "$1/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint; }
build_crane() { gobuild -ldflags "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=v0.22.1" -o "$1/crane" github.com/google/go-containerregistry/cmd/crane; }
build_operator_sdk() {
  local R=github.com/operator-framework/operator-sdk V=v1.42.2
  gobuild -tags containers_image_openpgp -ldflags "-s -w -X $R/internal/version.Version=$V -X $R/internal/version.GitVersion=$V -X $R/internal/version.KubernetesVersion=v1.33.1 -X $R/internal/version.ImageVersion=$V" -o "$1/operator-sdk" $R/cmd/operator-sdk
}
# scorecard's built-in tests, for its test image (same module and version as operator-sdk)
build_scorecard_test() { gobuild -tags containers_image_openpgp -ldflags "-s -w" -o "$1/scorecard-test" github.com/operator-framework/operator-sdk/images/scorecard-test; }
# opm needs cgo (sqlite); linked statically so it can be the only file in an image
build_opm() {
  local R=github.com/operator-framework/operator-registry
  CGO_ENABLED=1 CC=${CC:-gcc} gobuild -tags json1,netgo,osusergo,containers_image_openpgp -ldflags "-s -w -extldflags=-static -X $R/cmd/opm/version.opmVersion=v1.65.0" -o "$1/opm" $R/cmd/opm
}
# OLM v0 (olm-operator, catalog-operator, packageserver, and the util binaries its pods copy)
build_olm() {
  local M=github.com/operator-framework/operator-lifecycle-manager
  gobuild -tags json1 -ldflags "-s -w -X $M/pkg/version.OLMVersion=v0.42.0" -o "$1/" \
    $M/cmd/olm $M/cmd/catalog $M/cmd/package-server $M/cmd/copy-content $M/util/cpb
}
# OLM v1: operator-controller and catalogd (one module, one release); their manifests are the release's own
# rendered ones (hack/olmv1/render.sh)
build_operator_controller() {
  local M=github.com/operator-framework/operator-controller
  gobuild -tags containers_image_openpgp -ldflags "-s -w -X $M/internal/shared/version.version=v1.5.1" -o "$1/" \
    $M/cmd/operator-controller $M/cmd/catalogd
}
# OLM's registry pods probe the catalog with grpc_health_probe, so the catalog image carries it
build_grpc_health_probe() { gobuild -ldflags "-s -w" -o "$1/grpc_health_probe" github.com/grpc-ecosystem/grpc-health-probe; }

# helm only renders OLM's own chart (deploy/chart in the OLM module) for `make olm-install`
build_helm() { gobuild -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v3.21.4" -o "$1/helm" helm.sh/helm/v3/cmd/helm; }

# local cluster (hack/cluster): add-ons, node tools and the sandbox image's process; static, so each
# can be the only file in an image
build_coredns() { gobuild -ldflags "-s -w" -o "$1/coredns" ./coredns; }
build_local_path_provisioner() {
  local v; v=$(go list -m -f '{{.Version}}' github.com/rancher/local-path-provisioner)
  gobuild -ldflags "-s -w -X main.VERSION=$v" -o "$1/local-path-provisioner" github.com/rancher/local-path-provisioner
}
build_crictl() {
  local v; v=$(go list -m -f '{{.Version}}' sigs.k8s.io/cri-tools)
  gobuild -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$v" -o "$1/crictl" sigs.k8s.io/cri-tools/cmd/crictl
}
build_pause() { gobuild -ldflags "-s -w" -o "$1/pause" .; }
# the NetworkPolicy enforcer of the local cluster (our own, main.go in its module: see there why)
build_netpol() { gobuild -ldflags "-s -w" -o "$1/netpol-enforcer" .; }
# the local cluster's expandable StorageClass (csi-hostpath-expandable): upstream's external-provisioner and
# external-resizer sidecars, and our own node plugin (./hostpath: see there why), in one module so their
# shared Kubernetes packages compile once
build_csi() {
  local v
  v=$(go list -m -f '{{.Version}}' github.com/kubernetes-csi/external-provisioner/v5)
  gobuild -ldflags "-s -w -X main.version=$v" -o "$1/csi-provisioner" github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner
  v=$(go list -m -f '{{.Version}}' github.com/kubernetes-csi/external-resizer)
  gobuild -ldflags "-s -w -X main.version=$v" -o "$1/csi-resizer" github.com/kubernetes-csi/external-resizer/cmd/csi-resizer
  gobuild -ldflags "-s -w" -o "$1/csi-hostpath" ./hostpath
}
# MinIO for the backup e2e tests and benchmarks (hack/minio). Upstream tags are not semver, so the module
# is a pseudo-version; stamp it like upstream's buildscripts/gen-ldflags.go does (its "DEVELOPMENT" default
# is treated as a dev build).
build_minio() {
  local v c m=github.com/minio/minio/cmd
  v=$(go list -m -f '{{.Version}}' github.com/minio/minio); c=${v##*-}
  gobuild -ldflags "-s -w -X $m.Version=2026-02-12T20:18:48Z -X $m.ReleaseTag=RELEASE.2026-02-12T20-18-48Z -X $m.CommitID=$c -X $m.ShortCommitID=$c" \
    -o "$1/minio" github.com/minio/minio
}

# promtool runs the alert unit tests (`promtool test rules`); promql-names (this module's own command)
# lists the metrics an expression selects, with Prometheus' parser, for the test that every metric an
# alert or dashboard panel names is exported; prometheus is the server the alerts e2e test runs
# (test/e2e/alerts_test.go). remove_all_sd leaves out the service-discovery plugins (rule tests need
# none, and nomad's pinned pseudo-version is not served here); the server gets back only Kubernetes
# discovery (plugins/plugin_kubernetes.go's tag), which scrapes members as a ServiceMonitor does.
build_promtool() {
  local ld="-s -w -X github.com/prometheus/common/version.Version=3.16.0"
  gobuild -tags remove_all_sd -ldflags "$ld" -o "$1/promtool" github.com/prometheus/prometheus/cmd/promtool
  gobuild -tags remove_all_sd,enable_kubernetes_sd -ldflags "$ld" -o "$1/prometheus" github.com/prometheus/prometheus/cmd/prometheus
  gobuild -ldflags "-s -w" -o "$1/promql-names" ./promql-names
}

# The upstream NetworkPolicy e2e tests (`make test-netpol-upstream`, docs/dev/netpol-conformance.md): e2e.test,
# our suite main (./netpol) linking only test/e2e/network/netpol, stamped like the cluster binaries; and
# agnhost, the one binary of the image those tests run (hack/images set netpol), stamped with its VERSION.
build_e2e_test() {
  local ld="-s -w" p minor dir
  minor=$(cut -d. -f2 <<<"${K8S_VERSION#v}")
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$K8S_DATE"
  done
  go test -c -trimpath -ldflags "$ld" -o "$1/e2e.test" ./netpol
  dir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  gobuild -ldflags "-s -w -X main.Version=$(cat "$dir/test/images/agnhost/VERSION")" -o "$1/agnhost" k8s.io/kubernetes/test/images/agnhost
}

# kube-router, tried once as the local cluster's NetworkPolicy enforcer instead of hack/tools/netpol
# (docs/dev/netpol-conformance.md); test infrastructure only, not wired into hack/cluster
build_kube_router() {
  local M=github.com/cloudnativelabs/kube-router/v2 v t
  v=$(go list -m -f '{{.Version}}' $M); t=$(go list -m -f '{{.Time.Format "2006-01-02T15:04:05Z07:00"}}' $M)
  gobuild -ldflags "-s -w -X $M/pkg/version.Version=$v -X $M/pkg/version.BuildDate=$t" -o "$1/kube-router" $M/cmd/kube-router
}

usage() { echo "usage: $0 {kubernetes|etcd-v3.5|etcd-v3.6|etcd-v3.7|controller-gen|kustomize|golangci-lint|crane|operator-sdk|opm|olm|grpc-health-probe|helm|scorecard-test|coredns|local-path-provisioner|crictl|pause|netpol|csi|minio|promtool|operator-controller|e2e-test|kube-router}..." >&2; exit 2; }
[ $# -gt 0 ] || usage
for t in "$@"; do
  case $t in
    kubernetes) ensure kubernetes kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl ;;
    # envtest and the local cluster's own etcd use 3.6; every release's binaries stay in the cache for images
    etcd-v3.6) ensure etcd-v3.6 etcd etcdctl etcdutl ;;
    etcd-v3.5|etcd-v3.7) BIN=$BIN/$t ensure "$t" etcd etcdctl etcdutl ;;
    controller-gen|kustomize|golangci-lint|crane|operator-sdk|opm) ensure "$t" "$t" ;;
    olm) ensure olm olm catalog package-server copy-content cpb ;;
    operator-controller) ensure operator-controller operator-controller catalogd ;;
    grpc-health-probe) ensure grpc-health-probe grpc_health_probe ;;
    helm) ensure helm helm ;;
    scorecard-test) ensure scorecard-test scorecard-test ;;
    coredns|local-path-provisioner|crictl|pause|minio) ensure "$t" "$t" ;;
    promtool) ensure promtool promtool promql-names prometheus ;;
    netpol) ensure netpol netpol-enforcer ;;
    csi) ensure csi csi-provisioner csi-resizer csi-hostpath ;;
    e2e-test) ensure e2e-test e2e.test agnhost ;;
    kube-router) ensure kube-router kube-router ;;
    *) usage ;;
  esac
done
