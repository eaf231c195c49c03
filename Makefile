# Grove: two commands on a fresh Debian 12 machine, `make run` and `make test`.
# Every target installs what it needs first (make deps), and only what is missing.

SHELL := /bin/bash
GO ?= go
BIN := bin/grove
PKGS := ./...
APT_PKGS := libtorch-dev libopenblas0-openmp kcat hey etcd-server gcc g++ valgrind protobuf-compiler python3-protobuf chromium
# The FastAPI baseline of `make bench` (../shared/bench), the example model
# scripts, and XGBoost's Python package and C API (make bench-xgboost). An
# install that brings another BLAS build along (OpenBLAS's pthread build came
# with python3-xgboost on one host) may switch the BLAS alternatives:
# scripts/deps.sh sets them back.
APT_BENCH_PKGS := python3-torch python3-fastapi python3-uvicorn python3-onnx python3-xgboost libxgboost-dev

# Every Go build is position-independent: the binaries get full address
# space randomization, and the packages compiled for them are the ones the
# DeepRec processor library (-buildmode=c-shared) links, so that a build
# from a clean cache compiles Grove and its dependencies once, not twice.
export GOFLAGS := -buildmode=pie $(GOFLAGS)

# The test targets run go test without its own vet pass: make test runs
# go vet, with every analyzer, over the module (vet) and deploy/check
# first, and go test's pass, a subset under other flags, would analyse
# every dependency again in each run (about 95 s of a build from a clean
# cache on two cores). Run make vet beside a test target run alone. The
# test binaries are linked without DWARF (-w; stack traces need none),
# which takes about 45 % off each of some 70 links.
TESTFLAGS ?= -vet=off -ldflags=-w

# The version `grove version` prints, stamped into every build from git.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# make dist: the release tarball goes to DISTDIR.
DISTDIR ?= dist
DIST_NAME := grove-$(VERSION)-$(shell $(GO) env GOOS)-$(shell $(GO) env GOARCH)

.PHONY: all deps deps-bench build dist run test test-alone test-race test-unit test-it test-deploy test-ui test-processor processor ui ui-deps ui-check fuzz bench bench-xgboost vet fmt clean models

all: build

## deps: install the Debian packages Grove builds and tests with, if missing
## (leaving the host's BLAS alternatives as they were: scripts/deps.sh),
## fetch the ONNX Runtime library into .cache/onnxruntime (npm pack, pinned),
## build the TorchScript runtime's library over libtorch into
## .cache/torchshim (scripts/torchshim.sh, when its sources changed) and
## install the pinned Go tools the tests use (grpcurl).
deps:
	@scripts/deps.sh $(APT_PKGS)
	@scripts/onnxruntime.sh >/dev/null
	@scripts/torchshim.sh >/dev/null
	@scripts/tools.sh

deps-bench:
	@scripts/deps.sh $(APT_BENCH_PKGS)

## build: the grove binary in bin/, its version stamped from git.
build: deps
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/grove

## dist: the relocatable release $(DISTDIR)/grove-<version>-<os>-<arch>.tar.gz:
## bin/grove (stamped like build), lib/libonnxruntime.so.1 and
## lib/libgrove_torch.so (found by the binary at ../lib/ from its own path,
## each opened with the first model of its runtime), and, when this Makefile has the
## processor target, lib/libgrove_processor.so with include/processor.h.
## The host needs the Debian packages the README lists (docs/operations.md).
## The release's binary and library carry no DWARF (-ldflags -w): a fifth
## smaller and linked in about two thirds of the time; the symbol table
## stays, so perf, nm and stack traces name Go's functions.
dist: deps
	@set -euo pipefail; \
	  stage="$(DISTDIR)/$(DIST_NAME)"; rm -rf "$$stage" "$$stage.tar.gz"; \
	  mkdir -p "$$stage/bin" "$$stage/lib"; \
	  $(GO) build -ldflags '$(LDFLAGS) -w' -o "$$stage/bin/grove" ./cmd/grove; \
	  install -m 0644 "$$(scripts/onnxruntime.sh)" "$$stage/lib/libonnxruntime.so.1"; \
	  install -m 0755 "$$(scripts/torchshim.sh)" "$$stage/lib/libgrove_torch.so"; \
	  if grep -q '^processor:' $(firstword $(MAKEFILE_LIST)); then \
	    $(MAKE) --no-print-directory processor PROCESSOR_LDFLAGS=-w \
	      PROCESSOR_LIB="$$stage/lib/libgrove_processor.so" PROCESSOR_H="$$stage/include/processor.h"; \
	  fi; \
	  tar -C "$(DISTDIR)" --sort=name --owner=0 --group=0 --numeric-owner \
	    --mtime="@$$(git log -1 --format=%ct 2>/dev/null || echo 0)" \
	    -czf "$$stage.tar.gz" "$(DIST_NAME)"; \
	  rm -rf "$$stage"; echo "$$stage.tar.gz"

## processor: libgrove_processor.so, Grove as a DeepRec serving processor
## (docs/deeprec.md), and processor.h beside it, in bin/.
## PROCESSOR_LIB and PROCESSOR_H say where they go, PROCESSOR_LDFLAGS how
## the library is linked (make dist sets all three).
PROCESSOR_LIB ?= bin/libgrove_processor.so
PROCESSOR_H ?= bin/processor.h
PROCESSOR_LDFLAGS ?=
processor: deps
	$(GO) build -buildmode=c-shared -ldflags '$(PROCESSOR_LDFLAGS)' -o "$(PROCESSOR_LIB)" ./cmd/processor
	rm -f "$(basename $(PROCESSOR_LIB)).h"
	chmod 0755 "$(PROCESSOR_LIB)"
	install -D -m 0644 cmd/processor/processor.h "$(PROCESSOR_H)"

## test-processor: the C program of processor/ctest against the library:
## 8 threads x 1000 calls with a new version dropped in, then a short run
## on the ONNX model under valgrind memcheck (see processor/ctest/run.sh).
test-processor: processor
	processor/ctest/run.sh bin/libgrove_processor.so

## run: serve a copy of the example bucket (.run/bucket, made once) on
## 127.0.0.1:8080; the tour and the management API change the copy, and
## `rm -rf .run` starts over.
run: build
	@[ -d .run/bucket ] || { mkdir -p .run && cp -r examples/bucket .run/bucket; }
	$(BIN) serve --config examples/grove.yaml --bucket file://./.run/bucket

## test: vet, gofmt, go mod tidy (unchanged), the deployment files'
## checks, the console in a browser (test-ui), unit tests, fuzz seeds, the
## integration tests against the real binary (the release of make dist
## among them), then those that bound latency alone (test-alone) and the
## DeepRec processor library's C test (test-processor): on a freshly
## booted 2-core machine 24 minutes with test-race, 20 to 21 without it
## (the installs and downloads vary most), so CI (.ci/run) runs test-race
## after make test. The installs (deps: apt, npm,
## the TorchScript runtime's library) run beside vet, whose compiling of
## the module needs none of them.
test:
	$(MAKE) --no-print-directory -j2 deps vet
	$(MAKE) --no-print-directory test-deploy test-ui
	$(GO) test $(TESTFLAGS) -count=1 -timeout 20m -parallel 4 -skip '^($(ALONE)|$(ALONE_TORCH)|TestConsoleInChromium.*)$$' $(PKGS)
	$(MAKE) test-alone
	$(MAKE) test-processor

## test-alone: the integration tests that bound latency, and the tests
## that measure how a forward call's threads share the CPU, each run with
## nothing else beside it (make test skips them in its main pass).
ALONE := TestRapidResetFloodGetsGoAwayAndSparesOtherCallers
ALONE_TORCH := TestMatrixProductsKeepIntraOpThreadsWhicheverOpenBLAS
test-alone:
	GROVE_IT_LATENCY=1 $(GO) test $(TESTFLAGS) -count=1 -run '^($(ALONE))$$' ./it
	$(GO) test $(TESTFLAGS) -count=1 -run '^($(ALONE_TORCH))$$' ./servables/torch

## test-race: the packages whose goroutines share state (the actors, the
## outcome join, the cluster's forwarding transport) under the race
## detector (which does not build PIE binaries); about 4 minutes from a
## clean build cache on two cores, most of it compiling the module and its
## dependencies again for the race detector. CI runs it after make test.
RACE_PKGS := ./actors ./logging/outcome/join ./cluster/forward
test-race:
	GOFLAGS='$(filter-out -buildmode=pie,$(GOFLAGS))' $(GO) test $(TESTFLAGS) -race -count=1 -timeout 10m $(RACE_PKGS)

## ui-deps: the console's npm packages from ui/package-lock.json (npm ci,
## again only when the lockfile changed; no install scripts, never a
## browser download: the tests use Debian's chromium).
ui-deps:
	@command -v npm >/dev/null || scripts/deps.sh nodejs npm
	@if ! cmp -s ui/package-lock.json ui/node_modules/.grove-lock; then \
	  cd ui && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund && \
	  cp package-lock.json node_modules/.grove-lock; fi

## ui: type-check ui/src and rebuild the console's committed assets (ui/dist).
ui: ui-deps
	cd ui && node_modules/.bin/tsc -p . && node build.mjs dist

## ui-check: ui/src type-checks, its unit tests pass (ui/test/*.test.mjs, in
## Node, no browser), and the committed ui/dist is what it builds to.
ui-check: ui-deps
	cd ui && node_modules/.bin/tsc -p . && node --test test/*.test.mjs
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && (cd ui && node build.mjs "$$tmp/dist") && \
	  diff -r "$$tmp/dist" ui/dist || { echo "ui/dist does not match ui/src: run make ui and commit ui/dist"; exit 1; }

## test-ui: the console's build check, then the console in headless
## Chromium against the real binary (it/console_test.go), within 3 minutes.
test-ui: deps ui-check
	$(GO) test $(TESTFLAGS) -count=1 -timeout 3m ./it -run '^TestConsoleInChromium'

## test-deploy: the container build file and the Kubernetes manifests
## (deploy/check, a module of its own so that the Kubernetes, Prometheus
## Operator, Prometheus and BuildKit modules stay out of Grove's go.mod).
test-deploy: deps
	cd deploy/check && $(GO) vet ./... && \
	  { $(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change deploy/check/go.mod or go.sum:"; $(GO) mod tidy -diff; exit 1; }; } && \
	  $(GO) test $(TESTFLAGS) -count=1 -timeout 10m ./...

vet:
	$(GO) vet $(PKGS)
	@$(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change go.mod or go.sum:"; $(GO) mod tidy -diff; exit 1; }
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

## fuzz: run every fuzz target of the module for FUZZTIME each (default
## 30s; scripts/fuzz.sh), and list those that failed.
FUZZTIME ?= 30s
fuzz: deps
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

## bench: Go benchmarks, Grove's XGBoost runtime against XGBoost's C API
## (bench-xgboost), plus the HTTP load benchmark against the real binary
## (its report names the BLAS library grove ran on, as grove reports it).
bench: deps deps-bench
	$(GO) test -run '^$$' -bench . -benchmem ./servables/... ./actors/... ./internal/... ./auth/... ./transport/... ./api/... ./routing/... ./logging/... ./cmd/... ./processor/...
	$(MAKE) bench-xgboost
	$(GO) run ./cmd/grovebench
	$(MAKE) test-alone

## bench-xgboost: Grove's XGBoost runtime against XGBoost's own predictor
## through its C API (cmd/xgbbench, built with cgo and libxgboost-dev) on
## the two models of servables/xgboost/testdata/make_bench_models.py: 100
## trees of depth 6 (checked in) and 1,000 of depth 8 (about 28 MB, made
## into .cache/xgboost/<the script's hash>/ once, about a minute of CPU).
XGB_BENCH_SCRIPT := servables/xgboost/testdata/make_bench_models.py
XGB_BENCH_BIG = .cache/xgboost/$(shell sha256sum $(XGB_BENCH_SCRIPT) | cut -c1-12)/bench_1000x8.json
bench-xgboost: deps-bench
	@big="$(XGB_BENCH_BIG)"; [ -f "$$big" ] || { echo "making $$big"; /usr/bin/python3 $(XGB_BENCH_SCRIPT) 1000x8 "$$big"; }
	$(GO) run -tags xgbref ./cmd/xgbbench servables/xgboost/testdata/bench_100x6.json $(XGB_BENCH_BIG)

## models: regenerate the example models (needs /usr/bin/python3 with torch,
## onnx and xgboost).
models: deps-bench
	/usr/bin/python3 examples/models/make_models.py
	/usr/bin/python3 examples/models/make_game_model.py
	/usr/bin/python3 examples/models/make_xgboost_model.py

clean:
	rm -rf bin dist
