# hermes-box — run `make help` for the targets.

MOD      := github.com/hermes-box/hermes-box
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X $(MOD)/shared/buildinfo.Version=$(VERSION)
GO       ?= go
BIN      := bin
ARCHES   := arm64 amd64
# Release builds carry this tag: the packages that only tests use (sshdtest,
# tartest, ocitest, …) are excluded by it, so a release binary that imported
# one would not build.
RELEASETAG := hbxrelease
# Plain go commands build, vet and test everything: no build tags. The
# Executor's image pull lives in its own main package,
# guest-agent/cmd/hermes-box-agent-oci, so the agent that supervises the box
# and answers every relay call stays lean. The one tag, hbxtest, names the
# test hooks (HBX_TEST_*, the agent's test-only pins) in the binaries the
# tests build (sshdtest.GoBuild adds it); the release binaries below never
# have it, and tests/release_hooks_test.go checks their strings.

SHARED_SRC := $(shell find shared go.mod go.sum -type f ! -name '*_test.go' ! -path '*/testdata/*' 2>/dev/null)
HOST_SRC   := $(shell find host -type f ! -name '*_test.go' ! -path '*/testdata/*' 2>/dev/null) $(SHARED_SRC)
AGENT_SRC  := $(shell find guest-agent -type f ! -name '*_test.go' ! -path '*/testdata/*' 2>/dev/null) $(SHARED_SRC)
AGENTS     := $(foreach a,$(ARCHES),$(BIN)/hermes-box-agent-linux-$(a) $(BIN)/hermes-box-agent-oci-linux-$(a))

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: $(BIN)/hermes-box $(AGENTS) ## Build the host binary, the static agents and their Executor helpers

# The version stamp changes only when the version does, so an unchanged tree
# rebuilds nothing.
$(BIN)/.version: FORCE
	@mkdir -p $(BIN)
	@echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@

$(BIN)/hermes-box: $(HOST_SRC) $(BIN)/.version
	$(GO) build -tags $(RELEASETAG) -trimpath -ldflags '$(LDFLAGS)' -o $@ ./host

$(BIN)/hermes-box-agent-linux-%: $(AGENT_SRC) $(BIN)/.version
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -tags $(RELEASETAG) -trimpath -ldflags '$(LDFLAGS)' -o $@ ./guest-agent

$(BIN)/hermes-box-agent-oci-linux-%: $(AGENT_SRC) $(BIN)/.version
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -tags $(RELEASETAG) -trimpath -ldflags '$(LDFLAGS)' -o $@ ./guest-agent/cmd/hermes-box-agent-oci

# The host binary for every supported host platform, which `hermes-box
# package` carries so that a package restores on a host of another kind
# without a Go toolchain.
HOST_PLATFORMS := darwin-arm64 linux-arm64 linux-amd64
DIST := $(foreach p,$(HOST_PLATFORMS),$(BIN)/hermes-box-$(p))

.PHONY: dist hosts
dist: build hosts ## Also build hermes-box for every supported host platform (carried by hermes-box package)

# The cross-builds alone (host/internal/cli's TestDistBinariesInPortablePackage
# runs this into a temporary BIN and checks every binary's platform and tags).
hosts: $(DIST) ## Build only bin/hermes-box-<os>-<arch> for every supported host platform

$(BIN)/hermes-box-%: $(HOST_SRC) $(BIN)/.version
	CGO_ENABLED=0 GOOS=$(word 1,$(subst -, ,$*)) GOARCH=$(word 2,$(subst -, ,$*)) $(GO) build -tags $(RELEASETAG) -trimpath -ldflags '$(LDFLAGS)' -o $@ ./host

.PHONY: init
init: build ## Build, then create the box (hermes-box init)
	$(BIN)/hermes-box init

# check is the loop before every commit: the release build, the lint (gofmt,
# vet also for the Mac host, staticcheck, shellcheck) and every fast test,
# fences included. `go test -short` skips what builds the project's binaries,
# starts sshd or boots a machine (sshdtest.SkipShort says which); make test
# runs those, and CI runs make test.
.PHONY: check
check: build lint ## Before every commit: build, lint, the fences and every fast test (go test -short)
	$(GO) test -short -count=1 ./...

.PHONY: test
# The tests write boxes, stores and backups and fsync them: on a memory file
# system where the host has one (/dev/shm on Linux) they spend a quarter of
# the system time, and four tests a package wait on real processes at once.
TEST_TMPDIR   ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm)
TEST_PARALLEL ?= 4

test: ## Vet, run every Go test (race detector on) and the Python tests
	$(GO) vet ./...
	$(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) $(GO) test -race -count=1 -timeout 60m -parallel $(TEST_PARALLEL) ./...
	scripts/python-tests.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target briefly (FUZZTIME, default 5s each)
	scripts/fuzz.sh $(or $(FUZZTIME),5s)

.PHONY: lint
lint: ## gofmt check, go vet (also for the Mac host), staticcheck, shellcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags hbxtest ./host/internal/box/ ./guest-agent/internal/cli/
	GOOS=darwin GOARCH=arm64 $(GO) vet ./host/... ./shared/...
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./host
	$(GO) tool staticcheck ./...
	shellcheck scripts/*.sh scripts/hermes-box images/e2e/*.sh .ci/run guest-agent/internal/secrets/profile.sh

.PHONY: bench
bench: ## Run the benchmarks and print medians (COUNT, default 5)
	scripts/bench.sh $(or $(COUNT),5)

.PHONY: e2e
e2e: ## End-to-end run in real VMs (QEMU stand-in for smolvm; builds the cached guest image first, needs root)
	HBX_E2E_IMAGE=$$(images/e2e/build.sh) && export HBX_E2E_IMAGE && \
	HERMES_BOX_E2E=1 $(GO) test -count=1 -timeout 45m -v ./tests/e2e/...

.PHONY: e2e-arm64
e2e-arm64: ## The box's lifecycle in an arm64 guest under qemu-system-aarch64 (TCG), through the same stand-in (needs root, qemu-user-static)
	HBX_E2E_IMAGE=$$(E2E_ARCH=arm64 images/e2e/build.sh) && export HBX_E2E_IMAGE && \
	HERMES_BOX_E2E=1 SMOLVM_QEMU_ARCH=arm64 $(GO) test -count=1 -timeout 90m -v -run TestBoxLifecycle ./tests/e2e/...

.PHONY: e2e-smolvm
e2e-smolvm: build ## hermes-box doctor, then the disposable lifecycle test on a host with real smolvm (HERMES_BOX_E2E=1 and disposable HERMES_BOX_MACHINE_NAME, _BUILDER_NAME, _SSH_PORT)
	$(GO) run ./tests/lifecycle/e2e-smolvm $(BIN)/hermes-box

.PHONY: clean
clean: ## Remove built binaries
	rm -rf $(BIN)

.PHONY: FORCE
FORCE:
