# Dovetail's build. A fresh machine needs Go 1.26 and npm (Node.js): Go modules come from the Go
# module proxy, the AWS transport tests' emulators from npm and the Go proxy (make tools).
GO        ?= go
BIN       ?= bin
PKGS      ?= ./...
# Go's own caches stay where go env puts them; bin/ is git-ignored.

.PHONY: all build run package package-azure tools test test-short bench fuzz vet fmt lint staticcheck clean tidy generate verify-generated

all: build

# VERSION is what `dovetail version` prints (a tag, else the commit; "-dirty" with local changes).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/dovetail ./cmd/dovetail
	$(GO) build -o $(BIN)/agent ./agent/cmd/agent
	for fn in provision consolidate drift interruption lifecycle; do $(GO) build -o $(BIN)/$$fn ./functions/$$fn/cmd/$$fn || exit 1; done

## run: local dev mode with the embedded seed scenario (no cloud account, no cluster needed). The
## build step prints each package as it compiles (hack/build-progress.sh): a cold Go cache takes
## minutes, and says so. RUN_ARGS are passed to dev, e.g. RUN_ARGS=--keep.
RUN_ARGS ?=
run:
	GO=$(GO) bash hack/build-progress.sh $(BIN)/dovetail ./cmd/dovetail -ldflags "-X main.version=$(VERSION)"
	$(BIN)/dovetail dev $(RUN_ARGS)

## generate: the API types' DeepCopy methods (controller-gen, from the Go module proxy) and the
## compressed copies of embedded data (hack/zstdfile)
CONTROLLER_GEN ?= sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
generate:
	$(GO) run $(CONTROLLER_GEN) object paths=./shared/apis/v1/...
	$(GO) generate ./shared/catalog/

## verify-generated: fails when the generated code is not what make generate writes
verify-generated: generate
	git diff --exit-code -- shared/apis/v1/zz_generated.deepcopy.go shared/catalog/data/

## test: test tools (fauxqs, Lambda emulator), vet, formatting, generated code, and every test
test: tools vet fmt-check verify-generated
	$(GO) test -count=1 -timeout 20m $(PKGS)

test-short:
	$(GO) test -short -count=1 $(PKGS)

## bench: the solver, consolidation and codec benchmarks with memory figures (BenchmarkKarpenterShape: pods/s,
## nodes, B/op; BenchmarkCostQuality: plan $/h vs the LP lower bound), then the cost table
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x -timeout 30m ./shared/provisioning/ ./shared/catalog/ ./events/
	$(GO) test -count=1 -run '^TestCostQuality$$' -v ./shared/provisioning/
	$(GO) test -run '^$$' -bench Consolidate -benchmem -benchtime 1x -timeout 30m ./shared/disruption/

## fuzz: each native fuzz target for FUZZTIME (their seed corpora already run in make test):
## the envelope, the payloads (snapshot, podsPending, command), claim checks, notices, manifests
## and the bounded JSON walk under them
FUZZTIME ?= 20s
FUZZ_TARGETS = ./events:FuzzDecode ./events:FuzzDecodePayload ./events:FuzzClaimCheck \
	./events/notices:FuzzDecode ./shared/manifests:FuzzLoad ./shared/boundedjson:FuzzCheck
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

tidy:
	$(GO) mod tidy

clean:
	rm -rf $(BIN)

## controlplane: kube-apiserver, kube-controller-manager, kube-scheduler v1.34.2 and etcd v3.6.4 (one
## binary, built from the separate module e2e/controlplane) and kwok, for the e2e suite.
CONTROLPLANE_BIN ?= build/controlplane/bin
KWOK_VERSION     ?= v0.8.0
.PHONY: controlplane e2e
controlplane:
	cd e2e/controlplane && $(GO) build -o $(CURDIR)/$(CONTROLPLANE_BIN)/controlplane .
	test -x $(CONTROLPLANE_BIN)/kwok || GOBIN=$(CURDIR)/$(CONTROLPLANE_BIN) $(GO) install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)

## e2e: the whole path against the real control plane (agent, queue, provision, fake cloud, kwok nodes)
e2e: controlplane
	DOVETAIL_CONTROLPLANE_BIN=$(CURDIR)/$(CONTROLPLANE_BIN) $(GO) test -tags e2e -count=1 -timeout 30m -v ./e2e/...

## tools: fauxqs (SQS+S3 emulator) on Node 22 and aws-lambda-rie under .cache/tools, for the AWS transport tests
tools:
	bash hack/tools.sh

## package: Lambda zips of every function (bootstrap, provided.al2023, arm64 and amd64; each bootstrap's size
## reported, and held under 20 MB), the functions as NATS worker binaries, and static agent and
## scheduled-events binaries in dist/ (agent/Containerfile, functions/Containerfile)
package:
	GO=$(GO) bash hack/package.sh

## package-azure: an Azure Functions custom-handler app of every function (host.json, its
## function.json folders, the linux/amd64 handler) zipped as dist/<function>-azure.zip for infra/azure
package-azure:
	GO=$(GO) bash hack/package-azure.sh

## coldstart: each function's Lambda cold start under aws-lambda-rie, median of 10 (ms/init, ms/first-invoke)
.PHONY: coldstart
coldstart: tools
	$(GO) test -run '^$$' -bench ColdStart -benchtime 10x -timeout 20m ./functions/

## karpenter-compare: Karpenter core's scheduler (sigs.k8s.io/karpenter v1.15.0) and Dovetail's solver
## side by side on Karpenter's benchmark input (docs/karpenter-compare.md). A separate module
## (hack/karpenter-compare) so the main module never depends on Karpenter; Karpenter v1.15.0 needs
## Go 1.26.9, which GOTOOLCHAIN=auto fetches from the Go module proxy when the local Go is older.
## Not part of test, e2e or .ci/run. Arguments: KARPENTER_COMPARE_ARGS, e.g. "-pods 1000 -mix generic".
KARPENTER_COMPARE_ARGS ?=
.PHONY: karpenter-compare
karpenter-compare:
	cd hack/karpenter-compare && GOTOOLCHAIN=auto $(GO) run . $(KARPENTER_COMPARE_ARGS)

## scale: the whole path at cluster scale, Dovetail and Karpenter's own kwok controller
## (sigs.k8s.io/karpenter v1.15.0, built here from the module proxy) side by side, each on a fresh
## real control plane (docs/scale.md). A benchmark, not part of test, e2e or .ci/run; a separate
## module (hack/scale). Arguments: SCALE_ARGS, e.g. "-n 200,1000" (the default) or "-sides dovetail".
SCALE_ARGS ?=
SCALE_BIN  ?= build/scale
.PHONY: scale
scale: controlplane
	cd hack/scale && GOTOOLCHAIN=auto $(GO) build -o $(CURDIR)/$(SCALE_BIN)/karpenter-kwok sigs.k8s.io/karpenter/kwok
	cd hack/scale && GOTOOLCHAIN=auto $(GO) build -o $(CURDIR)/$(SCALE_BIN)/scale .
	$(GO) build -o $(SCALE_BIN)/agent ./agent/cmd/agent
	cd hack/scale && DOVETAIL_CONTROLPLANE_BIN=$(CURDIR)/$(CONTROLPLANE_BIN) $(CURDIR)/$(SCALE_BIN)/scale \
		-karpenter-bin $(CURDIR)/$(SCALE_BIN)/karpenter-kwok -agent-bin $(CURDIR)/$(SCALE_BIN)/agent \
		-karpenter-dir "$$(GOTOOLCHAIN=auto $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)" $(SCALE_ARGS)
