# eSIM ordering platform. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Every module of the workspace, from go.work.
MODULES := $(shell go list -m -f '{{.Dir}}' | sed 's|^$(CURDIR)/||')
PACKAGES := $(addprefix ./,$(addsuffix /...,$(MODULES)))
# Every service is services/<name>/cmd/<name> and every command cmd/<name>,
# so a new one is built and imaged without editing a list here.
main_dirs = $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard $(1)/main.go)))))
SERVICES := $(call main_dirs,services/*/cmd/*)
COMMANDS := $(call main_dirs,cmd/*)
# Pinned tools are built once per machine, into a cache outside the clone
# keyed by what pins them, so a fresh clone's `make test` and `make verify`
# spend their time on tests. .bin links to this clone's set.
ESIM_TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/esim-tools
export ESIM_TOOLS_CACHE
TOOLS_KEY := $(shell cat tools/go.mod tools/go.sum | sha256sum | cut -c1-16)-$(shell go env GOVERSION)
TOOLS_BIN := $(ESIM_TOOLS_CACHE)/tools-$(TOOLS_KEY)
export PATH := $(TOOLS_BIN):$(PATH)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Developer tools are pinned in tools/go.mod (Go `tool` directives) and built
# outside the workspace so their dependencies never leak into the services.
$(TOOLS_BIN)/.stamp:
	@echo "==> building pinned tools into $(TOOLS_BIN) (once per machine; takes a few minutes)"
	cd tools && GOWORK=off GOBIN=$(TOOLS_BIN).tmp go install tool
	@rm -rf $(TOOLS_BIN) && mv $(TOOLS_BIN).tmp $(TOOLS_BIN) && touch $@

.PHONY: tools
tools: $(TOOLS_BIN)/.stamp ## build the pinned developer tools (once per machine) and link them at .bin/
	@ln -sfn $(TOOLS_BIN) .bin

# helm, as the charts tests and the Tiltfile run it (tilt/helm.sh), built
# once per machine before the tests need it.
.PHONY: helm
helm:
	@tilt/helm.sh version --short >/dev/null

# promtool, which the charts tests check and unit-test the alerts with, and
# metricnames, with which a platform test holds the alerts and the
# dashboard to the services' /metrics: built from the Prometheus module
# pinned in tools/promtool/go.mod (outside the workspace), once per machine
# into the tools cache, before the tests need them.
.PHONY: promtool
promtool:
	@tools/promtool/run.sh promtool --version >/dev/null

# The Kubernetes control plane the charts' cluster test starts on loopback
# (etcd, kube-apiserver, controller-manager, scheduler, kwok; kubectl for
# a shell), pinned by the scratch modules in tools/cluster/ and built once
# per machine into the tools cache: several minutes the first time.
.PHONY: cluster-tools
cluster-tools: ## build the pinned Kubernetes control plane and kwok the cluster test runs (once per machine)
	@tools/cluster/cluster.sh build >/dev/null

# tilt and the OCI registry the charts' tilt test runs `tilt ci` with,
# pinned by the scratch modules tools/tilt and tools/tilt/registry (outside
# go.work) and built once per machine into the tools cache (tilt takes
# several minutes the first time); ko, which the Tiltfile builds images
# with, comes from `make tools`.
.PHONY: tilt-tools
tilt-tools: tools ## build the pinned tilt and registry the tilt test runs (once per machine)
	@tilt/tool.sh build >/dev/null

# The OpenAPI linters the contract test runs (Spectral, Redocly), pinned by
# tools/npm/package-lock.json and installed from it once per machine, into
# the tools cache under the lockfile's hash (the test looks there, by the
# same hash). --ignore-scripts: neither needs an install script, and one
# of their dependencies' is only telemetry.
NPM_TOOLS := $(ESIM_TOOLS_CACHE)/npm-$(shell sha256sum tools/npm/package-lock.json | cut -c1-16)

$(NPM_TOOLS)/.stamp:
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20 or newer with npm" >&2; exit 1; }
	@echo "==> installing the pinned OpenAPI linters into $(NPM_TOOLS) (once per machine)"
	@rm -rf $(NPM_TOOLS).tmp && mkdir -p $(NPM_TOOLS).tmp
	cp tools/npm/package.json tools/npm/package-lock.json $(NPM_TOOLS).tmp/
	cd $(NPM_TOOLS).tmp && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@rm -rf $(NPM_TOOLS) && mv $(NPM_TOOLS).tmp $(NPM_TOOLS) && touch $@

.PHONY: npm-tools
npm-tools: $(NPM_TOOLS)/.stamp ## install the pinned OpenAPI linters (Spectral, Redocly) the contract test runs

# The generated files record the protoc that made them (`// protoc v3.21.12`),
# so another version would rewrite every .pb.go and `make verify` would call
# an unchanged tree stale. 3.21.12 is Debian bookworm's protobuf-compiler.
PROTOC_VERSION := 3.21.12
APT_GET := apt-get -o DPkg::Lock::Timeout=300

.PHONY: protoc
protoc:
	@command -v protoc >/dev/null && test -f /usr/include/google/protobuf/timestamp.proto || { \
	  echo "==> installing protoc (Debian protobuf-compiler, libprotobuf-dev)"; \
	  if [ "$$(id -u)" = 0 ]; then $(APT_GET) install -y -qq protobuf-compiler libprotobuf-dev >/dev/null || { $(APT_GET) update -qq && $(APT_GET) install -y -qq protobuf-compiler libprotobuf-dev >/dev/null; }; \
	  else echo "protoc is missing: sudo apt-get install protobuf-compiler libprotobuf-dev" >&2; exit 1; fi; }
	@v=$$(protoc --version | awk '{print $$2}'); [ "$$v" = "$(PROTOC_VERSION)" ] || { \
	  echo "protoc $$v found; the committed code was generated by protoc $(PROTOC_VERSION) and would all be rewritten." >&2; \
	  echo "Install $(PROTOC_VERSION) (Debian bookworm: apt-get install protobuf-compiler) ahead of it on PATH." >&2; exit 1; }

.PHONY: generate
generate: tools protoc ## regenerate Twirp/protobuf and sqlc code, and what follows services.yaml
	@echo "==> protoc"
	# Generated files are written afresh, so one whose source is gone goes too
	# (and `make verify` reports it) instead of lingering and compiling.
	find proto \( -name '*.pb.go' -o -name '*.twirp.go' \) -delete
	# protoc-gen-twirp takes one protobuf package per invocation.
	cd proto && for dir in $$(find . -name '*.proto' -exec dirname {} \; | sort -u); do \
	  protoc -I . -I /usr/include \
	    --plugin=protoc-gen-go=$(TOOLS_BIN)/protoc-gen-go --go_out=. --go_opt=paths=source_relative \
	    --plugin=protoc-gen-twirp=$(TOOLS_BIN)/protoc-gen-twirp --twirp_out=. --twirp_opt=paths=source_relative \
	    $$dir/*.proto; done
	@echo "==> services.yaml"
	# After protoc: servicesgen tidies charts/go.mod, which needs every
	# service's packages, and with them the generated code, to build.
	cd cmd && go run ./internal/servicesgen
	@echo "==> sqlc"
	for f in $$(find services -name sqlc.yaml | sort); do (cd $$(dirname $$f) && rm -f db/*.go && sqlc generate); done

# Checksums of every generated file before and after regenerating: any
# difference (changed, added or removed file) means the committed code is
# stale. Works on a dirty tree too, unlike a plain git diff.
GENERATED = { find proto -name '*.pb.go' -o -name '*.twirp.go'; find services -path '*/postgres/db/*.go'; \
  echo go.work charts/go.mod charts/go.sum charts/services_gen_test.go k8s/postgres-init.yaml | tr ' ' '\n'; } | sort | xargs sha256sum

.PHONY: verify
verify: ## fail when generated code (Twirp/protobuf, sqlc) is stale
	@before=$$($(GENERATED)); $(MAKE) --no-print-directory generate >/dev/null; after=$$($(GENERATED)); \
	if [ "$$before" != "$$after" ]; then \
	  echo "generated code is stale; run 'make generate' and commit:" >&2; \
	  diff <(echo "$$before") <(echo "$$after") >&2; exit 1; fi
	@echo "generated code is up to date"

.PHONY: lint
lint: tools ## gofmt, go vet and staticcheck over every module (charts are linted by make test)
	@out=$$(gofmt -l $(MODULES) tools 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:" >&2; echo "$$out" >&2; exit 1; fi
	go vet $(PACKAGES)
	# staticcheck's checks are set in staticcheck.conf.
	staticcheck $(PACKAGES)

# Not in lint, which CI runs: on a cold module cache it downloads every
# dependency's own test dependencies, about 3.5 GB.
.PHONY: tidy
tidy: ## fail when a module's go.mod or go.sum is not tidy, so each builds outside the workspace too
	@for m in $(MODULES) tools tools/promtool tools/tilt tools/tilt/registry; do \
	  if ! out=$$(cd $$m && go mod tidy -diff 2>&1); then \
	    echo "$$m: go.mod or go.sum is not tidy (run: cd $$m && go mod tidy):" >&2; echo "$$out" | grep -v '^go: downloading' >&2; exit 1; fi; \
	done
	@echo "every go.mod is tidy"

# Workspace builds stamp no VCS revision unless asked, and telemetry reports
# it as service.version; a tree without git (an unpacked archive) builds
# unstamped ("devel") rather than failing.
BUILDVCS := $(shell git rev-parse --git-dir >/dev/null 2>&1 && echo -buildvcs=true)

.PHONY: build
build: ## build every binary into bin/
	@mkdir -p bin
	for s in $(SERVICES); do go build $(BUILDVCS) -o bin/$$s ./services/$$s/cmd/$$s; done
	for c in $(COMMANDS); do go build $(BUILDVCS) -o bin/$$c ./cmd/$$c; done

# How long make fuzz runs each fuzz target: a duration (30s) or a count of
# executions (the default: a million).
FUZZ_TIME ?= 1000000x
# How long make test fuzzes each target: a short pass, so that a target
# that no longer builds or fails at once is caught by every test run.
TEST_FUZZ_TIME ?= 2s

.PHONY: test
# With the race detector: the gateway's batchers, caches and limiters are
# shared by every request, and a data race there corrupts answers quietly.
test: helm npm-tools promtool cluster-tools tilt-tools ## run every test, with the race detector, against the local Postgres and Redis
	@mkdir -p .run
	go test -race -count=1 $(PACKAGES) 2>&1 | tee .run/test.log
	@echo "==> time per package, slowest first (all of it: .run/test.log)"
	@awk '$$1 == "ok" && $$3 ~ /s$$/ { t = $$3; sub(/s$$/, "", t); printf "%8.1fs  %s\n", t, $$2 }' .run/test.log | sort -rn | awk 'NR <= 15'
	@echo "==> fuzzing every fuzz target for $(TEST_FUZZ_TIME) (make fuzz runs each a million times)"
	tools/fuzz.sh $(TEST_FUZZ_TIME) $(MODULES)

.PHONY: fuzz
# Every Fuzz target of the workspace's modules, found by go test -list, so a
# new one is run without editing a list here. A failing input is written under the
# package's testdata/fuzz, where the next plain go test replays it.
fuzz: ## run every fuzz target for FUZZ_TIME (default 1,000,000 executions each) and report executions and results
	tools/fuzz.sh $(FUZZ_TIME) $(MODULES)

.PHONY: run
run: build ## start the whole platform on loopback
	./bin/platform

.PHONY: bench
bench: build ## gateway vs bare net/http benchmark, writes BENCHMARKS.md
	./bin/bench -out BENCHMARKS.md

# Service images, built by ko with no Docker daemon and no network: static
# binaries (CGO_ENABLED=0) on the nonroot base image that tools/imagebase
# writes into KOCACHE, pinned by digest in .ko.yaml. One OCI image layout per
# service under bin/images/<svc> and its SPDX SBOM under bin/sbom/<svc>
# (both git-ignored); the digests are printed.
KOCACHE := $(CURDIR)/.kocache
IMAGE_REPO ?= ghcr.io/esimplatform
# The images' OCI labels name their source, the commit built and the
# chart's appVersion (the charts' default tag); ko writes an SPDX SBOM of
# each next to the layouts, under bin/sbom/<svc>.
IMAGE_SOURCE ?= https://github.com/esimplatform/esim

.PHONY: images
images: tools ## build every service image into bin/images/ and print digests
	@mkdir -p $(KOCACHE) bin/images
	cd tools && GOWORK=off go run ./imagebase -layout $(KOCACHE)/img -verify ../.ko.yaml
	@revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown); \
	for s in $(SERVICES); do \
	  rm -rf bin/images/$$s bin/sbom/$$s; mkdir -p bin/sbom/$$s; \
	  version=$$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/$$s/Chart.yaml); \
	  ref=$$(KOCACHE=$(KOCACHE) KO_DOCKER_REPO=$(IMAGE_REPO) ko build --push=false --base-import-paths \
	    --oci-layout-path=bin/images/$$s --sbom=spdx --sbom-dir=bin/sbom/$$s \
	    --image-label org.opencontainers.image.source=$(IMAGE_SOURCE) \
	    --image-label org.opencontainers.image.revision=$$revision \
	    --image-label org.opencontainers.image.version=$$version \
	    --image-label org.opencontainers.image.title=$$s \
	    ./services/$$s/cmd/$$s); \
	  echo "image $$s $$version: $(IMAGE_REPO)/$$s@$${ref##*@} (bin/images/$$s, SBOM in bin/sbom/$$s)"; \
	done
