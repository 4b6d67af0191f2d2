# Local Kubernetes cluster (one node, or NODES on this one host) and daemonless images (hack/cluster, hack/images).
# Included from the root Makefile; every variable here can be overridden there or on the command line.
CLUSTER_DIR ?= $(CURDIR)/.cluster
IMG ?= ghcr.io/etcd-autopilot/etcd-autopilot:v0.2.0
NODES ?= 1
CLUSTER_MK_ROOT := $(patsubst %/hack/cluster/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

##@ Local cluster

.PHONY: cluster-up
cluster-up: ## Start the local cluster in $(CLUSTER_DIR) (idempotent; NODES=4: one control plane and 4 nodes in zones a, b, c); then: source $(CLUSTER_DIR)/env.sh
	NODES=$(NODES) $(CLUSTER_MK_ROOT)/hack/cluster/up.sh $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the local cluster, keeping its data.
	$(CLUSTER_MK_ROOT)/hack/cluster/down.sh $(CLUSTER_DIR)

.PHONY: cluster-purge
cluster-purge: ## Stop the local cluster and delete $(CLUSTER_DIR).
	$(CLUSTER_MK_ROOT)/hack/cluster/down.sh $(CLUSTER_DIR) --purge

.PHONY: images
images: ## Build the image archives (etcd, operator $(IMG), cluster add-ons) without a daemon.
	IMG=$(IMG) $(CLUSTER_MK_ROOT)/hack/images/build.sh build

.PHONY: cluster-load
cluster-load: ## Build and import all images into the running local cluster.
	IMG=$(IMG) CLUSTER_DIR=$(CLUSTER_DIR) $(CLUSTER_MK_ROOT)/hack/images/build.sh load
