# kubeskills: build, generate, test and run.

# Tool versions, pinned. Tools are built from the Go module proxy into bin/.
CONTROLLER_TOOLS_VERSION ?= v0.23.0

LOCALBIN := $(CURDIR)/bin
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)

# Where envtest finds kube-apiserver and etcd (built by hack/build-k8s.sh).
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2; exit }' hack/k8s/go.mod)
ENVTEST_ASSETS := $(LOCALBIN)/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS := $(ENVTEST_ASSETS)

GO_TEST_FLAGS ?=

# Every Go build and test here is static and records no source paths, as
# the images' binaries are (hack/images/build.sh): tests, linters and images
# then share one build cache instead of compiling each dependency twice.
export CGO_ENABLED := 0
export GOFLAGS += -trimpath

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC into config/.
	$(CONTROLLER_GEN) rbac:roleName=kubeskills-manager crd paths="./api/...;./internal/controller/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify
verify: generate manifests helm-crds ## Fail when generated files are stale or code is unformatted.
	@stale=$$(git status --porcelain -- api config charts); test -z "$$stale" || { echo "generated files are stale (run 'make generate manifests' and commit):"; echo "$$stale"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "unformatted: $$(gofmt -l $$(git ls-files '*.go'))"; exit 1; }

.PHONY: fmt
fmt: ## Format the code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet (the end-to-end tests and the image builder too).
	go vet ./...
	go vet -tags e2e ./test/e2e/
	cd hack/images && go vet ./...
	cd hack/flux && go vet ./...
	cd test/monitoring && go vet ./...

.PHONY: lint
lint: vet ## Run the linters: gofmt, go vet, and golangci-lint (.golangci.yml; built from the module proxy, cached).
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$$(hack/build-addons.sh golangci-lint)/golangci-lint run ./...

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd and kubectl for tests into bin/k8s/ (cached).
	@hack/build-k8s.sh kube-apiserver etcd kubectl >/dev/null

.PHONY: flux-crds
flux-crds: ## Fetch Flux's source- and kustomize-controller CRDs for tests into bin/flux/crds (Go module proxy, cached; versions pinned in hack/flux/go.mod).
	@hack/flux-crds.sh >/dev/null

.PHONY: test-tools
test-tools: ## Install the Debian packages the tests need (shells, Node.js, Chromium, and the real programs of the red-team corpus).
	@hack/test-tools.sh

.PHONY: test
test: envtest flux-crds helm test-tools ## Run unit and envtest tests against a real kube-apiserver and etcd.
	go test $(GO_TEST_FLAGS) ./...
	cd hack/images && go test $(GO_TEST_FLAGS) ./...
	cd hack/flux && go test $(GO_TEST_FLAGS) ./...
	cd test/monitoring && go test $(GO_TEST_FLAGS) ./...

# make test runs the red-team corpus too (go test ./...); this target runs it alone.
.PHONY: redteam
redteam: envtest test-tools ## Run the red-team corpus: attack lines run by the real runner, with stand-ins and a stand-in API server.
	go test -count=1 $(GO_TEST_FLAGS) ./test/redteam/...

.PHONY: bench
bench: envtest flux-crds ## Run the benchmarks against a real kube-apiserver and etcd; write BENCHMARKS.md.
	go run ./test/bench/cmd/report

##@ Build and run

.PHONY: build
build: ## Build the binaries into bin/.
	go build -o $(LOCALBIN)/ ./cmd/...

.PHONY: run
run: ## Run the manager against the cluster of the current kubeconfig.
	go run ./cmd/manager

# The sample agent's model for run-local: any OpenAI-compatible endpoint;
# without MODEL_URL, the scripted model of hack/local/model-script.json.
MODEL_URL ?=
MODEL ?=

.PHONY: run-local
run-local: envtest flux-crds build ## Start a local control plane with the operator, the samples and the sample agent.
	go run ./hack/local $(if $(MODEL_URL),--model-base-url=$(MODEL_URL)) $(if $(MODEL),--model-name=$(MODEL))

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine).
	docker build -t $${IMG:-kubeskills:dev} .

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $@

##@ Helm charts

HELM := $(LOCALBIN)/helm

.PHONY: helm
helm: ## Build Helm from the Go module proxy into bin/helm (cached; version pinned in hack/build-helm.sh).
	@hack/build-helm.sh >/dev/null

.PHONY: helm-crds
helm-crds: ## Copy the CRDs, the manager's RBAC and the admission policy from config/ into charts/kubeskills.
	hack/sync-chart-crds.sh

.PHONY: helm-lint
helm-lint: helm ## Lint the charts.
	$(HELM) lint --strict charts/kubeskills
	$(HELM) lint --strict charts/agent --set model.baseURL=http://model.example:8080/v1 --set model.name=model

.PHONY: helm-test
helm-test: envtest flux-crds helm ## Test the charts: lint, render, server-side dry-run and install on a real kube-apiserver.
	go test $(GO_TEST_FLAGS) ./test/charts/...

##@ Local cluster and end-to-end tests

.PHONY: images
images: ## Build the image tarballs (operator, toolbox, model server, pause, Flux) into bin/images/ without a registry.
	hack/images/build.sh $(LOCALBIN)/images

.PHONY: cluster-up
cluster-up: ## Start a real single-node cluster in a private network namespace (kubeconfig: bin/cluster/kubeconfig).
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and remove everything it left behind.
	hack/cluster/down.sh

.PHONY: demo
demo: build helm ## Start a local cluster with kubeskills, the samples and a sample agent, and print what to try.
	hack/demo/up.sh

.PHONY: demo-down
demo-down: cluster-down ## Stop the demo.

E2E_FLAGS ?=
# E2E_LATENCY_RUNS is how many `echo hi` runs the latency step compares
# (3 by default; `make e2e E2E_LATENCY_RUNS=20` for the benchmark's figure).
export E2E_LATENCY_RUNS

.PHONY: e2e
e2e: helm flux-crds test-tools ## Run the end-to-end tests on a fresh local cluster, then tear it down and check nothing is left.
	hack/cluster/down.sh
	hack/cluster/up.sh
	go test -tags e2e -count=1 -timeout 40m -v -run '^TestEndToEnd$$' $(E2E_FLAGS) ./test/e2e/; rc=$$?; hack/cluster/down.sh; exit $$rc

.PHONY: chaos
chaos: helm ## Break the local cluster while commands run (restarts, a lost leader, deleted pods), then load it; report in bin/chaos/report.json.
	hack/cluster/down.sh
	hack/cluster/up.sh
	go test -tags e2e -count=1 -timeout 60m -v -run '^TestChaos$$' $(E2E_FLAGS) ./test/e2e/; rc=$$?; hack/cluster/down.sh; exit $$rc
