# etcd-autopilot — see README.md. Everything is built from the Go module proxy and Debian's apt.

VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= ghcr.io/etcd-autopilot/etcd-autopilot
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
CHANNELS ?= candidate,fast,stable
DEFAULT_CHANNEL ?= stable

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
	$(TOOLS) controller-gen kustomize golangci-lint kubernetes etcd-v3.6 etcd-v3.5 etcd-v3.7 operator-sdk opm crane minio

$(CONTROLLER_GEN):
	$(TOOLS) controller-gen
$(KUSTOMIZE):
	$(TOOLS) kustomize
$(GOLANGCI_LINT):
	$(TOOLS) golangci-lint
.PHONY: envtest-assets
envtest-assets:
	$(TOOLS) kubernetes etcd-v3.6
# MinIO: the S3 tests of internal/backup run a real server (internal/miniotest)
.PHONY: minio
minio:
	$(TOOLS) minio

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: verify-generated
verify-generated: manifests generate ## Fail if generated files differ from what is committed.
	@git diff --exit-code -- api config || { echo "generated files are stale: run 'make manifests generate' and commit" >&2; exit 1; }

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
test-unit: envtest-assets minio ## Unit and envtest integration tests.
	go test ./... -count=1

.PHONY: test-e2e
test-e2e: cluster-up cluster-load ## End-to-end tests on the local cluster (brought up if needed).
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) go test -tags e2e ./test/e2e/ -count=1 -timeout 60m -v $(E2E_ARGS)

.PHONY: test
test: verify-generated vet lint test-unit test-e2e ## Everything CI runs: generated files, vet, lint, unit, envtest, e2e.

##@ Bundle (OLM)

OPERATOR_SDK := $(LOCALBIN)/operator-sdk
$(OPERATOR_SDK):
	$(TOOLS) operator-sdk

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) $(OPERATOR_SDK) ## Generate bundle/ and bundle.Dockerfile from config/manifests, then validate.
	$(OPERATOR_SDK) generate kustomize manifests --interactive=false -q --apis-dir api
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	kubectl apply --server-side -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the operator (config/default) into the cluster of the current kubeconfig.
	kubectl apply --server-side --force-conflicts -k config/default

.PHONY: demo
demo: cluster-up cluster-load ## Local cluster + operator + a 3-member sample EtcdCluster.
	CLUSTER_DIR=$(CLUSTER_DIR) hack/demo.sh

##@ Build

.PHONY: build
build: ## Build the manager binary.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/manager .

.PHONY: run
run: manifests generate ## Run the manager against the current kubeconfig.
	go run .

include hack/cluster/cluster.mk

##@ Benchmarks

.PHONY: bench
bench: cluster-up cluster-load ## Operator timings vs bare etcd pods on the local cluster; rewrites bench/results and BENCHMARKS.md.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig IMG=$(IMG) go test -tags bench ./test/bench/ -run . -count=1 -timeout 60m -v $(BENCH_ARGS)
