# Grove: two commands on a fresh Debian 12 machine, `make run` and `make test`.
# Every target installs what it needs first (make deps), and only what is missing.

SHELL := /bin/bash
GO ?= go
BIN := bin/grove
PKGS := ./...
APT_PKGS := libtorch-dev libopenblas0-openmp kcat hey etcd-server gcc valgrind protobuf-compiler python3-protobuf
# The FastAPI baseline of `make bench` (../shared/bench) and the example model scripts.
APT_BENCH_PKGS := python3-torch python3-fastapi python3-uvicorn python3-onnx

.PHONY: all deps deps-bench build run test test-unit test-it test-processor processor fuzz bench vet fmt clean models

all: build

## deps: install the Debian packages Grove builds and tests with, if missing,
## fetch the ONNX Runtime library into .cache/onnxruntime (npm pack, pinned)
## and install the pinned Go tools the tests use (grpcurl).
deps:
	@scripts/deps.sh $(APT_PKGS)
	@scripts/onnxruntime.sh >/dev/null
	@scripts/tools.sh

deps-bench:
	@scripts/deps.sh $(APT_BENCH_PKGS)

## build: the grove binary in bin/.
build: deps
	$(GO) build -o $(BIN) ./cmd/grove

## processor: libgrove_processor.so, Grove as a DeepRec serving processor
## (docs/deeprec.md), and processor.h beside it, in bin/.
processor: deps
	$(GO) build -buildmode=c-shared -o bin/libgrove_processor.so ./cmd/processor
	rm -f bin/libgrove_processor.h
	cp cmd/processor/processor.h bin/processor.h

## test-processor: the C program of processor/ctest against the library:
## 8 threads x 1000 calls with a new version dropped in, then a short run
## under valgrind memcheck.
test-processor: processor
	processor/ctest/run.sh bin/libgrove_processor.so

## run: serve a copy of the example bucket (.run/bucket, made once) on
## 127.0.0.1:8080; the tour and the management API change the copy, and
## `rm -rf .run` starts over.
run: build
	@[ -d .run/bucket ] || { mkdir -p .run && cp -r examples/bucket .run/bucket; }
	$(BIN) serve --config examples/grove.yaml --bucket file://./.run/bucket

## test: vet, gofmt, go mod tidy (unchanged), unit tests, fuzz seeds and the
## integration tests against the real binary.
test: deps vet
	$(GO) test -count=1 -timeout 20m $(PKGS)
	$(MAKE) test-processor

vet:
	$(GO) vet $(PKGS)
	@$(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change go.mod or go.sum:"; $(GO) mod tidy -diff; exit 1; }
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

## fuzz: run each fuzz target for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz: deps
	$(GO) test ./conf/modelconfig -run '^$$' -fuzz FuzzParseModelConfig -fuzztime $(FUZZTIME)
	$(GO) test ./cluster/placement -run '^$$' -fuzz FuzzCompute -fuzztime $(FUZZTIME)
	$(GO) test ./api/ba -run '^$$' -fuzz FuzzParseRequest -fuzztime $(FUZZTIME)
	$(GO) test ./api/forestflow -run '^$$' -fuzz FuzzParseInferenceRequest -fuzztime $(FUZZTIME)
	$(GO) test ./api/graphpipe -run '^$$' -fuzz FuzzParseRequest -fuzztime $(FUZZTIME)
	$(GO) test ./api/oip -run '^$$' -fuzz '^FuzzParseInferRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/oip -run '^$$' -fuzz '^FuzzNumber$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/oip -run '^$$' -fuzz '^FuzzInferInputs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/oip -run '^$$' -fuzz '^FuzzBytesBinary$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/sidecar -run '^$$' -fuzz '^FuzzTensorsFromProto$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/httpserver -run '^$$' -fuzz '^FuzzRoutes$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/httpserver -run '^$$' -fuzz '^FuzzReadBody$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/oip -run '^$$' -fuzz '^FuzzParseModelPath$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/auth -run '^$$' -fuzz '^FuzzParseBearer$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/auth -run '^$$' -fuzz '^FuzzParseTokens$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/auth -run '^$$' -fuzz '^FuzzParseJWKS$$' -fuzztime $(FUZZTIME)
	$(GO) test ./servables -run '^$$' -fuzz '^FuzzSniff$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/oip -run '^$$' -fuzz '^FuzzModelRoutes$$' -fuzztime $(FUZZTIME)
	$(GO) test ./servables/onnx -run '^$$' -fuzz '^FuzzGraphDims$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/graphpipe -run '^$$' -fuzz '^FuzzConfigs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./conf/modelconfig -run '^$$' -fuzz '^FuzzParseContractState$$' -fuzztime $(FUZZTIME)
	for f in FuzzParseServeRequest FuzzParsePolicy FuzzParseContractSettings FuzzParseMetrics; do \
	  $(GO) test ./api/forestflow -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; done
	$(GO) test ./conf -run '^$$' -fuzz '^FuzzParseBucketURL$$' -fuzztime $(FUZZTIME)
	$(GO) test ./conf/bucket -run '^$$' -fuzz '^FuzzParseChecksumFile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./api/manage -run '^$$' -fuzz '^FuzzParseRollback$$' -fuzztime $(FUZZTIME)
	$(GO) test ./processor -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME)
	for p in file gcs s3; do \
	  $(GO) test ./conf/bucket/$$p -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) || exit 1; done
	for f in FuzzParseSince FuzzDecode; do \
	  $(GO) test ./logging/audit -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; done
	$(GO) test ./api/deeprec -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)

## bench: Go benchmarks plus the HTTP load benchmark against the real binary.
bench: deps deps-bench
	$(GO) test -run '^$$' -bench . -benchmem ./servables/... ./api/... ./routing/... ./logging/... ./cmd/... ./processor/...
	$(GO) run ./it/cmd/grovebench

## models: regenerate the example models (needs /usr/bin/python3 with torch
## and onnx).
models: deps-bench
	/usr/bin/python3 examples/models/make_models.py
	/usr/bin/python3 examples/models/make_game_model.py

clean:
	rm -rf bin
