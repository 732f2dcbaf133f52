# eSIM ordering platform. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Every module of the workspace, from go.work.
MODULES := $(shell go list -m -f '{{.Dir}}' | sed 's|^$(CURDIR)/||')
PACKAGES := $(addprefix ./,$(addsuffix /...,$(MODULES)))
SERVICES := accounts catalogue gateway
COMMANDS := esimctl platform bench
TOOLS_BIN := $(CURDIR)/.bin
export PATH := $(TOOLS_BIN):$(PATH)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Developer tools are pinned in tools/go.mod (Go `tool` directives) and built
# outside the workspace so their dependencies never leak into the services.
$(TOOLS_BIN)/.stamp: tools/go.mod tools/go.sum
	@echo "==> building pinned tools into .bin (first time takes a few minutes)"
	cd tools && GOWORK=off GOBIN=$(TOOLS_BIN) go install tool
	@touch $@

.PHONY: tools
tools: $(TOOLS_BIN)/.stamp ## build the pinned developer tools into .bin/

.PHONY: protoc
protoc:
	@command -v protoc >/dev/null && test -f /usr/include/google/protobuf/timestamp.proto || { \
	  echo "==> installing protoc (Debian protobuf-compiler, libprotobuf-dev)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq protobuf-compiler libprotobuf-dev >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler libprotobuf-dev >/dev/null; }; \
	  else echo "protoc is missing: sudo apt-get install protobuf-compiler libprotobuf-dev" >&2; exit 1; fi; }

.PHONY: generate
generate: tools protoc ## regenerate Twirp/protobuf and sqlc code
	@echo "==> protoc"
	# protoc-gen-twirp takes one protobuf package per invocation.
	cd proto && for dir in $$(find . -name '*.proto' -exec dirname {} \; | sort -u); do \
	  protoc -I . -I /usr/include \
	    --plugin=protoc-gen-go=$(TOOLS_BIN)/protoc-gen-go --go_out=. --go_opt=paths=source_relative \
	    --plugin=protoc-gen-twirp=$(TOOLS_BIN)/protoc-gen-twirp --twirp_out=. --twirp_opt=paths=source_relative \
	    $$dir/*.proto; done
	@echo "==> sqlc"
	for f in $$(find services -name sqlc.yaml | sort); do (cd $$(dirname $$f) && sqlc generate); done

# Checksums of every generated file before and after regenerating: any
# difference (changed, added or removed file) means the committed code is
# stale. Works on a dirty tree too, unlike a plain git diff.
GENERATED = { find proto -name '*.pb.go' -o -name '*.twirp.go'; find services -path '*/postgres/db/*.go'; } | sort | xargs sha256sum

.PHONY: verify
verify: ## fail when generated code (Twirp/protobuf, sqlc) is stale
	@before=$$($(GENERATED)); $(MAKE) --no-print-directory generate >/dev/null; after=$$($(GENERATED)); \
	if [ "$$before" != "$$after" ]; then \
	  echo "generated code is stale; run 'make generate' and commit:" >&2; \
	  diff <(echo "$$before") <(echo "$$after") >&2; exit 1; fi
	@echo "generated code is up to date"

.PHONY: lint
lint: ## gofmt and go vet over every module (charts are linted by make test)
	@out=$$(gofmt -l $(MODULES) tools 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:" >&2; echo "$$out" >&2; exit 1; fi
	go vet $(PACKAGES)

# Workspace builds stamp no VCS revision unless asked, and telemetry reports
# it as service.version; a tree without git (an unpacked archive) builds
# unstamped ("devel") rather than failing.
BUILDVCS := $(shell git rev-parse --git-dir >/dev/null 2>&1 && echo -buildvcs=true)

.PHONY: build
build: ## build every binary into bin/
	@mkdir -p bin
	for s in $(SERVICES); do go build $(BUILDVCS) -o bin/$$s ./services/$$s/cmd/$$s; done
	for c in $(COMMANDS); do go build $(BUILDVCS) -o bin/$$c ./cmd/$$c; done

.PHONY: test
# With the race detector: the gateway's batchers, caches and limiters are
# shared by every request, and a data race there corrupts answers quietly.
test: ## run every test, with the race detector, against the local Postgres and Redis
	go test -race -count=1 $(PACKAGES)

.PHONY: run
run: build ## start the whole platform on loopback
	./bin/platform

.PHONY: bench
bench: build ## gateway vs bare net/http benchmark, writes BENCHMARKS.md
	./bin/bench -out BENCHMARKS.md

# Service images, built by ko with no Docker daemon and no network: static
# binaries (CGO_ENABLED=0) on the nonroot base image that tools/imagebase
# writes into KOCACHE, pinned by digest in .ko.yaml. One OCI image layout per
# service under bin/images/<svc> (git-ignored); the digests are printed.
KOCACHE := $(CURDIR)/.kocache
IMAGE_REPO ?= ghcr.io/esimplatform

.PHONY: images
images: tools ## build every service image into bin/images/ and print digests
	@mkdir -p $(KOCACHE) bin/images
	cd tools && GOWORK=off go run ./imagebase -layout $(KOCACHE)/img -verify ../.ko.yaml
	@for s in $(SERVICES); do \
	  rm -rf bin/images/$$s; \
	  ref=$$(KOCACHE=$(KOCACHE) KO_DOCKER_REPO=$(IMAGE_REPO) ko build --push=false --base-import-paths \
	    --oci-layout-path=bin/images/$$s ./services/$$s/cmd/$$s); \
	  echo "image $$s: $(IMAGE_REPO)/$$s@$${ref##*@} (bin/images/$$s)"; \
	done
