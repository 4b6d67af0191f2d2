# shellcheck shell=bash
# Names of the images hack/images/build.sh builds; sourced by it and by hack/cluster/up.sh.
# Explicit tags only: without a registry nothing can be pulled, and a :latest tag (or none)
# implies imagePullPolicy: Always.
ETCD_IMAGE_REPO=gcr.io/etcd-development/etcd
# built from hack/tools/etcd-v3.5, etcd-v3.6, etcd-v3.7; ETCD_IMAGE_VERSIONS=v3.6.16 loads one release only
# (a test that needs one, while the other releases are still being built)
ETCD_IMAGE_VERSIONS=${ETCD_IMAGE_VERSIONS:-"v3.5.35 v3.6.16 v3.7.3"}
OPERATOR_IMAGE=${IMG:-ghcr.io/etcd-autopilot/etcd-autopilot:v0.2.0}
# the operator image is an index of these platforms (the CSV's operatorframework.io/arch.* and os.*
# labels claim exactly them: test/bundle); a local cluster imports its own platform's image
OPERATOR_PLATFORMS=${OPERATOR_PLATFORMS:-linux/amd64 linux/arm64}
PAUSE_IMAGE=registry.k8s.io/pause:3.10              # hack/tools/pause (our own program)
BUSYBOX_IMAGE=localhost/busybox:1.35.0              # Debian's busybox-static (local-path helper pods, tests)
COREDNS_IMAGE=localhost/coredns:v1.14.7             # hack/tools/coredns
LPP_IMAGE=localhost/local-path-provisioner:v0.0.37  # hack/tools/local-path-provisioner
CSI_PROVISIONER_IMAGE=localhost/csi-provisioner:v5.3.0  # hack/tools/csi (csi-hostpath-expandable's sidecars)
CSI_RESIZER_IMAGE=localhost/csi-resizer:v1.14.0
MINIO_IMAGE=localhost/minio:RELEASE.2026-02-12T20-18-48Z  # hack/tools/minio (backup e2e tests, benchmarks: hack/minio)
REGISTRY_IMAGE=localhost/crane-registry:v0.22.1     # hack/tools/crane (the image registry OLM v1 pulls from: hack/olmv1)
# The local cluster's registry (hack/olmv1/install.sh): its Service's fixed ClusterIP and port, which
# every node's containerd mirrors ghcr.io and gcr.io to (hack/cluster/up.sh: certs.d hosts.toml) and the
# host pushes to (hack/registry-push.sh); it holds images under their paths without the registry host.
REGISTRY_SVC_IP=10.96.0.50
REGISTRY_PORT=5000
# the registries mirrored there, as containerd names them (the images' registry hosts)
REGISTRY_MIRRORED="ghcr.io gcr.io"
# The upstream NetworkPolicy e2e tests (make test-netpol-upstream) run this, under the exact name their
# framework asks for (k8s.io/kubernetes v1.34.4 test/utils/image/manifest.go: Agnhost), so no KUBE_TEST_REPO_LIST
AGNHOST_IMAGE=registry.k8s.io/e2e-test-images/agnhost:2.56   # hack/tools/e2e-test (test/images/agnhost)
