# videogen-operator. `make help` lists the targets.

IMG ?= videogen-operator:latest
K8S_VERSION ?= 1.37.1
ETCD_VERSION ?= 3.6.7
# Binaries built from Go modules by hack/setup-envtest.sh (no downloads).
ENVTEST_ASSETS ?= $(CURDIR)/bin/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS = $(ENVTEST_ASSETS)

CONTROLLER_GEN ?= go tool controller-gen
# kustomize is pinned in its own tools module so its dependencies stay out of go.mod; helm in
# a module of its own (hack/tools/helm), so its Kubernetes libraries do not move kustomize's.
KUSTOMIZE ?= $(CURDIR)/bin/kustomize
HELM ?= $(CURDIR)/bin/helm
# kind for hack/kind-e2e.sh, likewise in a module of its own (hack/tools/kind).
KIND ?= $(CURDIR)/bin/kind
CHART := charts/videogen-operator
KUBECTL ?= kubectl
CONTAINER_TOOL ?= docker
GO_TEST_FLAGS ?= -timeout 30m
FUZZTIME ?= 200000x

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs and the manager ClusterRole from the API types and RBAC markers; copy them into the chart.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/...;./controllers/..." output:crd:artifacts:config=config/crd/bases
	go run ./hack/crddoc config/crd/bases/*.yaml
	hack/sync-chart.sh

.PHONY: generate
generate: ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Format the code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet ## Check formatting and vet (fails on unformatted files instead of rewriting them).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi

.PHONY: verify-generated
verify-generated: ## Fail if generated code or manifests are stale.
	hack/verify-generated.sh

.PHONY: verify-tidy
verify-tidy: ## Fail if `go mod tidy` would change go.mod or go.sum (prints the diff).
	go mod tidy -diff

.PHONY: verify-proto
verify-proto: ## Fail if the generated protobuf/connect code is stale (needs protoc 3.21, Debian protobuf-compiler).
	hack/verify-proto.sh

.PHONY: proto
proto: ## Regenerate the protobuf/connect code of the Event Service.
	hack/gen-proto.sh

.PHONY: setup
setup: ## Check the system packages make test needs; as root on Debian or Ubuntu, install the missing ones.
	hack/setup.sh test

.PHONY: setup-envtest
setup-envtest: ## Build kube-apiserver and etcd for envtest into bin/k8s (cached; first build takes minutes).
	K8S_VERSION=$(K8S_VERSION) ETCD_VERSION=$(ETCD_VERSION) ENVTEST_ASSETS=$(ENVTEST_ASSETS) hack/setup-envtest.sh >/dev/null

.PHONY: setup-versitygw
setup-versitygw: ## Build the Versity S3 Gateway into bin/ for the S3 blob store tests (cached).
	hack/setup-versitygw.sh >/dev/null

.PHONY: verify-manifests
verify-manifests: $(KUSTOMIZE) ## Check that every kustomization renders.
	@for d in config/default config/crd config/rbac config/samples; do $(KUSTOMIZE) build $$d >/dev/null || { echo "kustomize build $$d failed"; exit 1; }; done

.PHONY: verify-chart
verify-chart: $(HELM) ## Lint the Helm chart and render it with default and monitoring values (test/manifests compares it with kustomize).
	$(HELM) lint --strict $(CHART)
	$(HELM) template videogen $(CHART) -n videogen-system >/dev/null
	$(HELM) template videogen $(CHART) -n videogen-system --set metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true >/dev/null

.PHONY: verify-alerts
verify-alerts: $(KUSTOMIZE) ## Parse every alert expression with Prometheus' PromQL parser (hack/promql, a module of its own).
	$(KUSTOMIZE) build config/prometheus | go -C hack/promql run .

.PHONY: test
test: setup setup-envtest setup-versitygw verify-generated verify-tidy verify-proto lint verify-manifests verify-alerts verify-chart ## Run all tests: units, envtest suites (real kube-apiserver and etcd), short fuzzing.
	go test $(GO_TEST_FLAGS) ./...
	hack/fuzz.sh $(FUZZTIME)

.PHONY: test-e2e
test-e2e: setup-envtest ## Run the end-to-end suite against the local stack (real processes); part of make test.
	go test ./test/e2e/ -count=1 -timeout 20m -ginkgo.v

.PHONY: test-hostile
test-hostile: setup-envtest ## Run the hostile-client suite against the local stack (real processes); part of make test.
	go test ./test/hostile/ -count=1 -timeout 10m -ginkgo.v

.PHONY: test-fuzz
test-fuzz: ## Run every fuzz target for FUZZTIME (an exec count like 200000x, or a duration).
	hack/fuzz.sh $(FUZZTIME)

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager binary.
	go build -o bin/manager ./cmd/manager

BINARIES := manager apiserver worker videogenctl videogen-local

.PHONY: build-all
build-all: ## Build every binary into bin/.
	@for b in $(BINARIES); do go build -o bin/$$b ./cmd/$$b || exit 1; done

# hack/setup.sh first: a missing package stops the run before minutes of building, not after.
# Where install-plugin puts kubectl-videogen: a directory on your PATH.
PLUGIN_DIR ?= $(shell go env GOPATH)/bin

.PHONY: install-plugin
install-plugin: ## Install videogenctl as the kubectl plugin `kubectl videogen` (PLUGIN_DIR/kubectl-videogen).
	mkdir -p $(PLUGIN_DIR)
	go build -o $(PLUGIN_DIR)/kubectl-videogen ./cmd/videogenctl
	@# kubectl (1.26+) completes a plugin's arguments through kubectl_complete-<plugin>.
	printf '#!/bin/sh\nexec kubectl-videogen __complete "$$@"\n' > $(PLUGIN_DIR)/kubectl_complete-videogen
	chmod +x $(PLUGIN_DIR)/kubectl_complete-videogen
	@echo "installed $(PLUGIN_DIR)/kubectl-videogen: try kubectl videogen --help (it must be on PATH)"

.PHONY: run
run: ## Set up what is missing, then run the whole service locally (control plane, manager, apiserver, worker) with demo data; RUN_ARGS passes flags to bin/videogen-local (--help lists them).
	hack/setup.sh run
	$(MAKE) --no-print-directory setup-envtest build-all
	bin/videogen-local $(RUN_ARGS)

.PHONY: run-manager
run-manager: manifests generate ## Run only the manager against the cluster in your kubeconfig.
	go run ./cmd/manager --metrics-secure=false

# The worker image (Dockerfile.worker: the reference worker with ffmpeg and facedetect).
WORKER_IMG ?= videogen-worker:latest
# Extra `docker build` flags for it, e.g. --build-arg EXTRA_PACKAGES=fonts-dejavu-core.
WORKER_BUILD_ARGS ?=
# Which kustomization deploy, undeploy and build-installer render: config/default, or an overlay
# such as config/prometheus (adds a ServiceMonitor) or config/e2e (the kind test cluster).
DEPLOY_DIR ?= config/default
KIND_CLUSTER ?= videogen-e2e

.PHONY: docker-build
docker-build: docker-build-worker ## Build both images: the operator (IMG) and the worker (WORKER_IMG), with a running CONTAINER_TOOL (docker) that can pull the base images.
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-build-worker
docker-build-worker: ## Build the reference worker image (WORKER_IMG).
	$(CONTAINER_TOOL) build $(WORKER_BUILD_ARGS) -f Dockerfile.worker -t $(WORKER_IMG) .

.PHONY: docker-push
docker-push: ## Push both images.
	$(CONTAINER_TOOL) push $(IMG)
	$(CONTAINER_TOOL) push $(WORKER_IMG)

.PHONY: kind-load
kind-load: $(KIND) ## Load both images into the kind cluster KIND_CLUSTER (instead of pushing them).
	$(KIND) load docker-image --name $(KIND_CLUSTER) $(IMG) $(WORKER_IMG)

# RENDER prints DEPLOY_DIR with IMG and WORKER_IMG set. `kustomize edit set image` runs on a
# copy of config/ in bin/render, so the committed kustomization.yaml files never change.
RENDER_DIR := $(CURDIR)/bin/render
RENDER = rm -rf $(RENDER_DIR) && mkdir -p $(RENDER_DIR) && cp -R config $(RENDER_DIR)/ && \
	(cd $(RENDER_DIR)/config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)) && \
	(cd $(RENDER_DIR)/config/worker && $(KUSTOMIZE) edit set image worker=$(WORKER_IMG)) && \
	$(KUSTOMIZE) build $(RENDER_DIR)/$(DEPLOY_DIR)

.PHONY: build-installer
build-installer: manifests generate $(KUSTOMIZE) ## Write dist/install.yaml: CRDs, RBAC, manager and worker with IMG and WORKER_IMG.
	mkdir -p dist
	$(RENDER) > dist/install.yaml

##@ Deployment

.PHONY: install
install: manifests $(KUSTOMIZE) ## Install the CRDs into the cluster in your kubeconfig.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests $(KUSTOMIZE) ## Remove the CRDs (and every object of them!) from the cluster.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests $(KUSTOMIZE) ## Deploy DEPLOY_DIR (default config/default) with IMG and WORKER_IMG to the cluster in your kubeconfig.
	$(RENDER) | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove DEPLOY_DIR from the cluster, CRDs (and every task, account, ...) included, their finalizers taken off.
	KUSTOMIZE=$(KUSTOMIZE) KUBECTL=$(KUBECTL) hack/undeploy.sh $(DEPLOY_DIR)

.PHONY: test-e2e-kind
test-e2e-kind: ## Run the e2e suite on a throwaway kind cluster, everything built offline (hack/kind-e2e.sh; skips without Docker unless KIND_E2E=required).
	hack/kind-e2e.sh

$(KUSTOMIZE): hack/tools/go.mod hack/tools/go.sum
	go build -modfile=hack/tools/go.mod -o $@ sigs.k8s.io/kustomize/kustomize/v5

# Built from its Go module (no binary downloads here); about three minutes the first time.
$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	go build -C hack/tools/helm -o $@ helm.sh/helm/v4/cmd/helm

$(KIND): hack/tools/kind/go.mod hack/tools/kind/go.sum
	go build -C hack/tools/kind -o $@ sigs.k8s.io/kind

##@ Release

# make release VERSION=1.2.3 REGISTRY=registry.example.com/videogen: images are
# $(REGISTRY)/videogen-operator:$(VERSION) and $(REGISTRY)/videogen-worker:$(VERSION).
VERSION ?=
REGISTRY ?=

.PHONY: release
release: $(KUSTOMIZE) $(HELM) ## Write dist/: install.yaml and the packaged Helm chart of VERSION, images under REGISTRY, and SHA256SUMS.
	@[ -n "$(VERSION)" ] || { echo "usage: make release VERSION=x.y.z [REGISTRY=registry.example.com/videogen]"; exit 1; }
	HELM=$(HELM) hack/release.sh "$(VERSION)" "$(REGISTRY)"

##@ Chaos

CHAOS_TIMEOUT ?= 60m

.PHONY: test-chaos
test-chaos: setup-envtest ## Crash and fault survival against the local stack; scale with CHAOS_TASKS=3000 CHAOS_DURATION=10m.
	go test ./test/chaos/ -run '^TestChaos$$' -count=1 -timeout $(CHAOS_TIMEOUT) -v

##@ Benchmarks

.PHONY: bench
bench: setup-envtest ## Run the benchmarks of docs/benchmarks.md (submission, lifecycle, connectors, Stripe, webhooks; a few minutes) and print a summary.
	hack/bench/run.sh all

.PHONY: bench-scale
bench-scale: setup-envtest ## Run the scale benchmark (10,000 finished and 1,000 active tasks, new and running; about 6 minutes).
	hack/bench/run.sh scale
