# etcd-autopilot — see README.md. Everything is built from the Go module proxy and Debian's apt.

VERSION ?= 0.2.0
IMAGE_TAG_BASE ?= ghcr.io/etcd-autopilot/etcd-autopilot
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
CHANNELS ?= candidate,fast,stable
DEFAULT_CHANNEL ?= stable
# The CSV's createdAt: fixed per release so `make bundle` is reproducible.
BUNDLE_CREATED_AT ?= 2026-11-22T00:00:00Z
# Every earlier release, oldest first, as VERSION=COMMIT (hack/release.sh appends): the catalog serves
# each, built from its commit. The last is the previous release, where the OLM upgrade test starts.
RELEASES ?= 0.1.0=c48036b
PREV_VERSION ?= $(firstword $(subst =, ,$(lastword $(RELEASES))))
PREV_COMMIT ?= $(lastword $(subst =, ,$(lastword $(RELEASES))))
# The digest of each image a release names ("REFERENCE DIGEST"), which make bundle pins the CSV to;
# hack/release.sh writes it (none until a release is cut with digests: the bundle then names tags).
IMAGE_DIGESTS := config/manifests/image-digests.txt

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

LOCALBIN := $(CURDIR)/bin
export PATH := $(LOCALBIN):$(PATH)
TOOLS := hack/tools/build.sh
CONTROLLER_GEN := $(LOCALBIN)/controller-gen
KUSTOMIZE := $(LOCALBIN)/kustomize
GOLANGCI_LINT := $(LOCALBIN)/golangci-lint
# envtest: a real kube-apiserver and etcd, built from source (hack/tools/kubernetes, hack/tools/etcd-v3.6)
export KUBEBUILDER_ASSETS := $(LOCALBIN)
# The local cluster's state directory (hack/cluster); short, because of unix socket path limits.
CLUSTER_DIR ?= $(CURDIR)/.cluster

.PHONY: all
all: build

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Tools

.PHONY: tools
tools: ## Build the pinned toolchain (no-op when cached).
	$(TOOLS) controller-gen kustomize golangci-lint kubernetes etcd-v3.6 etcd-v3.5 etcd-v3.7 operator-sdk opm crane \
	  olm grpc-health-probe scorecard-test minio promtool

$(CONTROLLER_GEN):
	$(TOOLS) controller-gen
$(KUSTOMIZE):
	$(TOOLS) kustomize
$(GOLANGCI_LINT):
	$(TOOLS) golangci-lint
.PHONY: envtest-assets
envtest-assets:
	$(TOOLS) kubernetes etcd-v3.6
# etcd 3.5 and 3.7: internal/resources starts each supported release with the flags it generates
.PHONY: etcd-releases
etcd-releases:
	$(TOOLS) etcd-v3.5 etcd-v3.7
# opm: test/community renders the community catalogs again (hack/community.sh --check)
.PHONY: opm
opm:
	$(TOOLS) opm
# crane: test/bundle's release test resolves digests in crane's registry (hack/digests.sh)
.PHONY: crane
crane:
	$(TOOLS) crane
# MinIO: the S3 tests of internal/backup run a real server (internal/miniotest)
.PHONY: minio
minio:
	$(TOOLS) minio
# promtool and promql-names: the alert and dashboard tests (internal/metrics/alerts_test.go); prometheus:
# the server of the alerts e2e test (test/e2e/alerts_test.go)
.PHONY: promtool
promtool:
	$(TOOLS) promtool

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC (the supported etcd versions go into spec.version's markers first: hack/versionmarkers).
	go run ./hack/versionmarkers
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code, docs/conditions-and-events.md (from internal/reason and internal/controller) and docs/api-reference.md (from the CRDs).
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."
	go run ./hack/docgen
	go run ./hack/apidocgen

.PHONY: verify-generated
verify-generated: manifests generate ## Fail if generated files differ from what is committed.
	@git diff --exit-code -- api config docs/conditions-and-events.md docs/api-reference.md || { echo "generated files are stale: run 'make manifests generate' and commit" >&2; exit 1; }
	@hack/olm/render.sh --check
	@hack/olmv1/render.sh --check
	@hack/community.sh --check

.PHONY: fmt
fmt:
	go fmt ./...

.PHONY: vet
vet:
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: test-unit
test-unit: envtest-assets etcd-releases minio promtool opm crane ## Unit and envtest integration tests.
	go test ./... -count=1
	cd hack/tools/netpol && go test . -count=1   # the local cluster's NetworkPolicy enforcer (its own module)
	cd hack/tools/csi && go test ./hostpath -count=1   # the local cluster's CSI node plugin (its own module)
	cd hack/crdupgrade && go test . -count=1   # OLM v1's CRD upgrade safety between consecutive releases (crdify, its own module)

# The spec fuzzer (internal/controller/robustness): `make test-unit` runs its seeds and a fixed seeded batch
# of 1000 inputs (~20 s); this runs it for FUZZTIME from a random seed (printed; FUZZ_SEED=n replays).
FUZZTIME ?= 10m
FUZZ_SEED ?= $(shell date +%s)
.PHONY: fuzz
fuzz: envtest-assets ## Fuzz EtcdCluster/EtcdBackup/EtcdBackupSchedule specs against envtest and a running manager for FUZZTIME (default 10m).
	FUZZ_DURATION=$(FUZZTIME) FUZZ_SEED=$(FUZZ_SEED) go test ./internal/controller/robustness/ -run '^TestSpecFuzzer$$' -count=1 -v -timeout 0

# Every e2e test has its own namespace and operator process, so they run side by side; 3 at a time keeps
# the 2-vCPU CI machine responsive enough for the tests' timing bounds. At 5 the suite once took 726 s, but on
# slower days of the same machines 5 tests beside each other held the load average at 40-70, each test ran
# 2-5 times its time alone, and rolls, elections and slow-member detection missed their bounds; at 6, each test
# took about a fifth longer than at 5, and the suite no less time.
# The suite hands its E2E_PARALLEL slots out itself, longest test first (framework.Parallel); go test's own
# limit is set above the number of tests so that it never decides the order.
E2E_PARALLEL ?= 3
.PHONY: test-e2e
test-e2e: envtest-assets cluster-up cluster-load promtool ## End-to-end tests on the local cluster (brought up if needed); a second kube-apiserver (envtest's) runs on a restored cluster.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) E2E_PARALLEL=$(E2E_PARALLEL) go test -tags e2e ./test/e2e/ -count=1 -timeout 80m -parallel 100 -v $(E2E_ARGS)

# The node-fault suite (test/e2e/nodes_test.go) needs the local cluster with several nodes; on the one-node
# cluster of test-e2e its tests skip. It runs last in `make test`: adding the nodes changes the default
# StorageClass to node-local volumes, and its faults (a node switched off, every node drained) would hit the
# other suites' clusters, so its tests run one at a time.
.PHONY: test-nodes
test-nodes: envtest-assets ## Node-fault e2e tests (power-off with a local volume, a flap inside the grace period, every node drained in turn) on the local cluster with 4 nodes (added if needed).
	$(MAKE) cluster-up NODES=4
	IMG=$(IMG) CLUSTER_DIR=$(CLUSTER_DIR) ETCD_IMAGE_VERSIONS=v$$(sed -n 's/^const Default = "\(.*\)"/\1/p' internal/versions/versions.go) \
	  hack/images/build.sh load etcd operator   # the suite's clusters run the default etcd only; up.sh loaded the system images
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) NODES_RESULTS=$(NODES_RESULTS) go test -tags e2e ./test/e2e/ -count=1 -timeout 60m -run '^TestNode' -v $(E2E_ARGS)

# The chaos suite (test/chaos): a checked workload under member, operator, volume, network and kubelet
# faults; CHAOS_SEED=n replays a run's random choices, CHAOS_FAULTS=a,b sets the scheduled faults.
CHAOS_DURATION ?= 3m
CHAOS_ENV = KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) CHAOS_SEED=$(CHAOS_SEED) CHAOS_FAULTS=$(CHAOS_FAULTS)
.PHONY: test-chaos
test-chaos: envtest-assets ## The chaos suite for CHAOS_DURATION (3m in CI) on 4 nodes (its node power-off needs them): fails on a non-linearizable history, a lost acknowledged write or no convergence.
	$(MAKE) cluster-up NODES=4
	$(MAKE) cluster-load
	$(CHAOS_ENV) CHAOS_DURATION=$(CHAOS_DURATION) go test -tags e2e ./test/chaos/ -run '^TestChaos(FullDisk)?$$' -count=1 -timeout 30m -v

DURATION ?= 30m
.PHONY: chaos
chaos: envtest-assets ## A chaos soak for DURATION (default 30m) on 4 nodes, random faults (node faults too) after the schedule; writes bench/results/chaos_*.json.
	$(MAKE) cluster-up NODES=4
	$(MAKE) cluster-load
	$(CHAOS_ENV) CHAOS_DURATION=$(DURATION) CHAOS_RESULTS=$(CURDIR)/bench/results go test -tags e2e ./test/chaos/ -run '^TestChaos$$' -count=1 -timeout 4h -v

# The upstream Kubernetes NetworkPolicy e2e tests (k8s.io/kubernetes v1.34.4 test/e2e/network/netpol, built as
# bin/e2e.test) against the local cluster's enforcer, on 4 nodes so that policies are checked across nodes as well;
# prints the pass/fail/skip list for docs/dev/netpol-conformance.md (NETPOL_DOC=that file writes it there).
# Not in `make test`: it measures the test infrastructure, not the operator. NETPOL_FOCUS, NETPOL_SKIP,
# NETPOL_TIMEOUT, NETPOL_REPORT_DIR: see hack/netpol-upstream.sh.
.PHONY: bench-nodes
bench-nodes: envtest-assets ## The node-fault suite on 4 nodes, writing its figures (power-off back to full strength, availability through a power-off and through drains, default placement per zone) to bench/results.
	$(MAKE) test-nodes E2E_ARGS="$(E2E_ARGS)" NODES_RESULTS=$(CURDIR)/bench/results

.PHONY: test-netpol-upstream
test-netpol-upstream: ## Upstream NetworkPolicy e2e tests (Kubernetes v1.34.4) on the local cluster with 4 nodes; prints the pass/fail/skip list (docs/dev/netpol-conformance.md).
	$(MAKE) cluster-up NODES=4
	CLUSTER_DIR=$(CLUSTER_DIR) hack/netpol-upstream.sh $(NETPOL_ARGS)

.PHONY: test-netpol-kube-router
test-netpol-kube-router: ## The same upstream tests with kube-router v2.1.0 enforcing in place of netpol-enforcer, for a trial (test infrastructure only).
	$(MAKE) cluster-up NODES=4
	CLUSTER_DIR=$(CLUSTER_DIR) hack/netpol-kube-router.sh $(NETPOL_ARGS)

.PHONY: test
test: ## Everything CI runs (hack/test.sh): generated files; then one lane runs e2e, the bundle check, OLM v0 e2e, scorecard, OLM v1 e2e, the release rehearsal, then on 4 nodes the node faults and chaos; vet, lint, unit and envtest run beside it once the bundle check has passed.
	hack/test.sh

##@ Bundle (OLM)

OPERATOR_SDK := $(LOCALBIN)/operator-sdk
$(OPERATOR_SDK):
	$(TOOLS) operator-sdk

# The OpenShift releases the bundle is for: the one shipping minKubeVersion (CSV base) and later.
MIN_KUBE_VERSION = $(shell awk '$$1 == "minKubeVersion:" {print $$2}' config/manifests/bases/etcd-autopilot.clusterserviceversion.yaml)
OPENSHIFT_VERSIONS ?= v4.17

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) $(OPERATOR_SDK) ## Generate bundle/ and bundle.Dockerfile from config/manifests, then validate.
	$(OPERATOR_SDK) generate kustomize manifests --interactive=false -q --apis-dir api
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	@# operator-sdk overwrites but never deletes: an object dropped from config/ would linger in bundle/
	rm -rf bundle/manifests
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
	sed -i -E 's|^(    createdAt: ).*|\1"$(BUNDLE_CREATED_AT)"|; s|^(    containerImage: ).*|\1$(IMG)|' bundle/manifests/etcd-autopilot.clusterserviceversion.yaml
	@# the release's digests (hack/release.sh) for every image, and the disconnected claim that follows
	hack/digests.sh pin $(IMAGE_DIGESTS) bundle/manifests/etcd-autopilot.clusterserviceversion.yaml
	$(KUSTOMIZE) build config/manifests/leader-election -o bundle/manifests/
	printf '\n  # OpenShift: %s and later (minKubeVersion %s). No olm.maxOpenShiftVersion: the bundle uses no API a\n  # later OpenShift removes (test/bundle, deprecated-apis), and the cap would block cluster upgrades.\n  com.redhat.openshift.versions: %s\n' \
	  $(OPENSHIFT_VERSIONS) $(MIN_KUBE_VERSION) $(OPENSHIFT_VERSIONS) >> bundle/metadata/annotations.yaml
	printf '\n# OpenShift versions (see metadata/annotations.yaml).\nLABEL com.redhat.openshift.versions=%s\n' $(OPENSHIFT_VERSIONS) >> bundle.Dockerfile
	hack/community.sh
	$(MAKE) --no-print-directory bundle-validate

.PHONY: community
community: ## Regenerate community/ (the community catalogs' tree: this release's bundle directory, the rendered catalogs) from bundle/; make bundle runs it too.
	hack/community.sh

.PHONY: verify-bundle
verify-bundle: bundle ## Fail if bundle/ differs from what make bundle renders (it is reproducible), after validating it.
	@git diff --exit-code -- bundle bundle.Dockerfile config/manager community || { echo "bundle/ is stale: run 'make bundle' and commit" >&2; exit 1; }

.PHONY: bundle-validate
bundle-validate: $(OPERATOR_SDK) envtest-assets opm crane ## Validate bundle/: operator-sdk's suites (operatorframework, operatorhub, community), test/bundle (every operator-framework/api validator, console readiness, images), size under 1 MiB compressed.
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional name=operatorhub
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional name=community --optional-values=index-path=bundle.Dockerfile
	go test ./test/bundle/ -count=1
	@size=$$(tar -C bundle -cf - . | gzip -9 | wc -c); echo "bundle: $$size bytes compressed"; [ $$size -lt 1048576 ]

##@ Catalog and OLM

OLM_IMAGES_ENV = IMG=$(IMG) IMAGE_TAG_BASE=$(IMAGE_TAG_BASE) PREV_VERSION=$(PREV_VERSION) PREV_COMMIT=$(PREV_COMMIT) RELEASES="$(RELEASES)" CLUSTER_DIR=$(CLUSTER_DIR)

.PHONY: catalog-build
catalog-build: ## Bundle images (this tree + every earlier release, RELEASES), catalog/ rendered from catalog/templates by opm and validated, the catalog image.
	$(OLM_IMAGES_ENV) hack/images/build.sh build catalog

.PHONY: prev-image
prev-image: ## Build and load the previous release's operator image (PREV_VERSION, commit PREV_COMMIT); prints its references.
	$(OLM_IMAGES_ENV) hack/images/build.sh load prev
	@$(OLM_IMAGES_ENV) hack/images/build.sh refs prev

.PHONY: olm-manifests
olm-manifests: ## Re-render hack/olm/olm.yaml from OLM's Helm chart (builds helm); after changing hack/olm/values.yaml or the OLM module.
	hack/olm/render.sh

.PHONY: olm-install
olm-install: cluster-up ## Install OLM v0.42.0 (built from source, its own Helm chart as rendered in hack/olm/olm.yaml) into the local cluster.
	$(OLM_IMAGES_ENV) hack/images/build.sh load olm
	CLUSTER_DIR=$(CLUSTER_DIR) hack/olm/install.sh

.PHONY: catalog-load
catalog-load: cluster-up ## catalog-build, then import the catalog, bundle and operator images into the local cluster.
	$(OLM_IMAGES_ENV) hack/images/build.sh load catalog

# The catalog image by digest (OLM pulls tag references), for CatalogSources.
CATALOG_REF = $$($(OLM_IMAGES_ENV) hack/images/build.sh refs catalog | awk '$$1 ~ /-catalog:/ {print $$2}')
# The OLM e2e's synthetic next release (hack/images/olm.sh, set next): the next patch, marked -e2e.
NEXT_VERSION = $(shell v=$(VERSION); echo $${v%.*}.$$(( $${v##*.} + 1 ))-e2e)
NEXT_CATALOG_REF = $$($(OLM_IMAGES_ENV) NEXT_VERSION=$(NEXT_VERSION) hack/images/build.sh refs next | awk '$$1 ~ /-catalog:/ {print $$2}')

.PHONY: test-olm
test-olm: olm-install catalog-load ## e2e through OLM: every install mode, upgrade from the previous release, an upgrade held while etcd is mid version change, uninstall/reinstall, every operand image (members, backup, test-restore and archive pods) in relatedImages.
	$(OLM_IMAGES_ENV) NEXT_VERSION=$(NEXT_VERSION) hack/images/build.sh load next
	CLUSTER_DIR=$(CLUSTER_DIR) hack/images/build.sh load test   # MinIO: the backups whose Jobs and archive worker have their images checked
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig OLM_CATALOG_IMAGE=$(CATALOG_REF) OLM_VERSION=$(VERSION) OLM_PREV_VERSION=$(PREV_VERSION) \
	  OLM_NEXT_CATALOG_IMAGE=$(NEXT_CATALOG_REF) OLM_NEXT_VERSION=$(NEXT_VERSION) \
	  go test -tags e2e ./test/olm/ -count=1 -timeout 40m -parallel 5 -v $(E2E_ARGS)

.PHONY: scorecard
scorecard: olm-install catalog-load ## operator-sdk scorecard (basic, olm and our own suites) against the operator installed through OLM.
	$(OLM_IMAGES_ENV) hack/images/build.sh load scorecard
	CLUSTER_DIR=$(CLUSTER_DIR) hack/olm/scorecard.sh $(CATALOG_REF) etcd-autopilot.v$(VERSION)

.PHONY: olmv1-manifests
olmv1-manifests: ## Re-render hack/olmv1/olmv1.yaml from operator-controller's release manifests; after changing hack/olmv1/kustomization.yaml or the module.
	hack/olmv1/render.sh

.PHONY: olmv1-install
olmv1-install: cluster-up ## Install OLM v1 (operator-controller + catalogd v1.5.1, built from source) and an in-cluster image registry into the local cluster.
	$(OLM_IMAGES_ENV) hack/images/build.sh load olmv1
	CLUSTER_DIR=$(CLUSTER_DIR) hack/olmv1/install.sh

.PHONY: olmv1-publish
olmv1-publish: olmv1-install catalog-load ## Push the catalog and bundle images (this release, earlier ones, the e2e's next one) into the cluster's registry.
	$(OLM_IMAGES_ENV) NEXT_VERSION=$(NEXT_VERSION) hack/images/build.sh list catalog next | grep -E -- '-(bundle|catalog):' | sort -u | \
	  CLUSTER_DIR=$(CLUSTER_DIR) hack/registry-push.sh

# The cluster's registry (hack/olmv1/install.sh) stands in for ghcr.io and gcr.io: every node's containerd
# and OLM v1 pull our images from it by the names they have. REGISTRY_SETS: the hack/images sets to push.
REGISTRY_SETS ?= operator etcd catalog
.PHONY: registry-push
registry-push: olmv1-install ## Push the images of REGISTRY_SETS (operator, etcd, catalog with its bundles) into the local cluster's registry under their own names.
	$(OLM_IMAGES_ENV) hack/images/build.sh list $(REGISTRY_SETS) | sort -u | CLUSTER_DIR=$(CLUSTER_DIR) hack/registry-push.sh

.PHONY: test-olmv1
test-olmv1: cluster-load olmv1-publish ## e2e through OLM v1: AllNamespaces from the previous release, two upgrades through the catalog, uninstall with clusters serving, Single/OwnNamespace via watchNamespace.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig OLMV1_CATALOG_IMAGE=$(CATALOG_REF) OLMV1_NEXT_CATALOG_IMAGE=$(NEXT_CATALOG_REF) \
	  OLM_VERSION=$(VERSION) OLM_PREV_VERSION=$(PREV_VERSION) OLM_NEXT_VERSION=$(NEXT_VERSION) \
	  go test -tags e2e ./test/olmv1/ -count=1 -timeout 20m -v $(E2E_ARGS)

# The registry's address from this host: its Service's fixed ClusterIP (hack/images/images.sh)
REGISTRY_ADDR = $$(. hack/images/images.sh && echo $$REGISTRY_SVC_IP:$$REGISTRY_PORT)
.PHONY: test-release
test-release: cluster-load olm-install olmv1-install ## e2e of a release: hack/release-rehearsal.sh cuts the next minor release from HEAD against the cluster's registry (digests resolved there), then OLM v0 (CatalogSource by digest) and OLM v1 (the docs' ClusterCatalog and ClusterExtension) install it; every pod must run a released digest.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig RELEASE_REGISTRY=$(REGISTRY_ADDR) \
	  go test -tags e2e ./test/release/ -count=1 -timeout 60m -v $(E2E_ARGS)

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	kubectl apply --server-side -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the operator (config/default) into the cluster of the current kubeconfig.
	kubectl apply --server-side --force-conflicts -k config/default

.PHONY: demo
demo: cluster-up cluster-load olm-install catalog-load ## Local cluster + OLM + the operator through a Subscription + a 3-member sample EtcdCluster.
	CLUSTER_DIR=$(CLUSTER_DIR) hack/demo.sh $(CATALOG_REF) etcd-autopilot.v$(VERSION)

##@ Build

.PHONY: build
build: ## Build the manager and worker binaries.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/worker ./cmd/worker

.PHONY: plugin
plugin: ## Build the kubectl etcd plugin (bin/kubectl-etcd; put it on the PATH as kubectl-etcd).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/kubectl-etcd ./cmd/kubectl-etcd

.PHONY: run
run: manifests generate ## Run the manager against the current kubeconfig.
	go run ./cmd/manager

include hack/cluster/cluster.mk

##@ Benchmarks

# BENCH_RUN picks benchmarks by name (e.g. TestBench$$ for the lifecycle ones, TestBenchConsistencyChecksCost for the checks' cost; the scale curve is make bench-scale); BENCH_REPS the runs per figure (5); BENCH_SIZES the cluster sizes of TestBench (1,3,5).
BENCH_RUN ?= .
.PHONY: bench
bench: cluster-up cluster-load ## Operator timings vs bare etcd pods on the local cluster, then the loopback, PITR and node-fault figures; rewrites bench/results and BENCHMARKS.md.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) go test -tags bench ./test/bench/ -run '$(BENCH_RUN)' -skip '^TestBenchScale$$' -count=1 -timeout 150m -v $(BENCH_ARGS)
	$(MAKE) bench-consistency
	$(MAKE) bench-heap
	$(MAKE) bench-pitr
	$(MAKE) bench-nodes

# What the consistency checks cost a steady writer: two 3-member etcd clusters (bin/etcd) on loopback, checks on
# and off, no Kubernetes cluster needed (≈ 13 min); writes bench/results/consistency_*.json. BENCH_DB_MIB (128),
# BENCH_RATE (200 puts/s), BENCH_PAIRS (5) and BENCH_SEGMENT (one operator interval ÷ BENCH_PAIRS) change what it measures.
.PHONY: bench-consistency
bench-consistency: ## Write p99 with the consistency checks on vs off, and one HashKV round's time (3 local etcd processes each).
	$(TOOLS) etcd-v3.6
	go test -tags bench ./test/bench/consistency/ -run '$(BENCH_RUN)' -count=1 -timeout 30m -v

# Point-in-time recovery: RPO after losing a whole cluster, restores to 20 past instants, the archive worker's cost
# (write p99 on vs off, its RSS) and a restore with replay vs a plain one; 3-member etcd clusters (bin/etcd), the
# worker of this tree and MinIO (bin/minio) on loopback, no Kubernetes cluster needed (≈ 18 min); writes
# bench/results/pitr_*.json. BENCH_RATE (200 ops/s), BENCH_PAIRS (5) and BENCH_SEGMENT (1m) with BENCH_LEAD (15s),
# BENCH_INSTANTS (20) over BENCH_PIT_WRITE (100s), BENCH_RPO_REPS (3) of BENCH_RPO_WRITE (30s) change what it measures.
.PHONY: bench-pitr
bench-pitr: ## RPO, point-in-time correctness, the archive's cost and restore time (local etcd processes and MinIO).
	$(TOOLS) etcd-v3.6 minio
	go test -tags bench ./test/bench/pitr/ -run '$(BENCH_RUN)' -count=1 -timeout 45m -v

# TestBackupBench alone on the local cluster (the backup Job and restores against etcdctl and etcdutl), without the
# suites make bench runs after it (BENCH_RUN does not reach the node-fault suite); rewrites bench/results/backup_*.json,
# restore_*.json and BENCHMARKS.md's backup section.
.PHONY: bench-backup
bench-backup: cluster-up cluster-load ## The backup and restore figures alone (TestBackupBench, BENCH_REPS runs) on the local cluster.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) go test -tags bench ./test/bench/ -run '^TestBackupBench$$' -count=1 -timeout 150m -v $(BENCH_ARGS)

# The backup Job's command on loopback (test/bench/backupspeed): one etcd with client TLS and a 1.1 GiB database, MinIO,
# `worker backup` of this tree with the Job's flags against etcdctl save + upload, and the floors (HashKV, the stream
# read alone, an upload from memory); no Kubernetes cluster, writes nothing (≈ 5 min). BENCH_COMPARE=/other/worker,…
# runs other builds in the same repetitions.
.PHONY: bench-backup-loopback
bench-backup-loopback: ## The backup Job's command against etcdctl save + upload on loopback, with its floors (no cluster; logs only).
	$(TOOLS) etcd-v3.6 minio
	go test -tags bench ./test/bench/backupspeed/ -run '^TestBackupLoopback$$' -count=1 -timeout 40m -v

# The operator's informer cache with 1,000 unrelated Secrets, Pods and ConfigMaps, filtered and not (envtest);
# writes bench/results/operator_cache_heap_1000_unrelated.json.
.PHONY: bench-cache
bench-cache: envtest-assets ## Heap of the operator's cache beside 1,000 unrelated objects, filtered vs unfiltered (BENCH_REPS runs, 3).
	BENCH_RESULTS=$(CURDIR)/bench/results BENCH_REPS=$${BENCH_REPS:-3} go test ./internal/controller/etcdcluster/ -run '^TestCacheHoldsOnlyTheOperatorsObjects$$' -count=1 -v

# The operator's heap per additional EtcdCluster without the cluster: the whole operator on envtest with 10, then 50
# 1-member clusters (HEAP_PROFILE_DIR keeps heap profiles of both steps), then what one connected TLS etcd client
# holds (bin/etcd on loopback); writes bench/results/operator_heap_kib_per_cluster.json.
.PHONY: bench-heap
bench-heap: envtest-assets ## Operator heap per additional EtcdCluster (envtest), per connected etcd client and per re-dial of one (bin/etcd).
	BENCH_HEAP=1 BENCH_RESULTS=$(CURDIR)/bench/results go test ./internal/controller/etcdcluster/ -run '^TestOperatorHeapPerCluster$$' -count=1 -v
	BENCH_HEAP=1 go test ./internal/etcdclient/ -run '^(TestClientMemoryPerCluster|TestClientDialCost)$$' -count=1 -v

# The scale curve: one operator with SCALE_STEPS (10,50,100) 1-member EtcdClusters beside 1,000 unrelated Secrets
# and ConfigMaps; writes bench/results/scale_*.json and the Scale section of BENCHMARKS.md (≈ 15 min to measure, then minutes to delete 100 volumes).
SCALE_STEPS ?= 10,50,100
.PHONY: bench-scale
bench-scale: cluster-up cluster-load ## Operator RSS, CPU, API writes and reconcile latency with 10, 50 and 100 EtcdClusters.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) SCALE_STEPS=$(SCALE_STEPS) go test -tags bench ./test/bench/ -run '^TestBenchScale$$' -count=1 -timeout 90m -v
