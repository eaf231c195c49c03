#!/usr/bin/env bash
# Regenerates the Go code of Grove's protobuf schemas (api/proto -> api/grovepb).
# Installs what is missing first: Debian's protoc (protobuf-compiler, with the
# well-known types from libprotobuf-dev) and protoc-gen-go at the version of
# google.golang.org/protobuf that go.mod requires, so the generated code and
# the runtime always match. Run from anywhere; the output is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh protobuf-compiler libprotobuf-dev

# protoc-gen-go, pinned to the runtime version in go.mod.
version=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
bindir="$(go env GOPATH)/bin"
gen="$bindir/protoc-gen-go"
if ! [ -x "$gen" ] || [ "$("$gen" --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
  echo "installing protoc-gen-go $version"
  GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$version"
fi

protoc \
  --plugin=protoc-gen-go="$gen" \
  --proto_path=api/proto \
  --proto_path=/usr/include \
  --go_out=. \
  --go_opt=module=github.com/groveml/grove \
  $(cd api/proto && find . -name '*.proto' | sort | sed 's|^\./||')
echo "generated: $(cd api && find grovepb -name '*.pb.go' | sort | tr '\n' ' ')"
