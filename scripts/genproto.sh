#!/usr/bin/env bash
# Regenerates the Go code of Grove's protobuf schemas. Each schema lives
# in a proto/ folder beside the package its code goes to (each file's
# go_package says which; docs/protobuf.md lists them and their upstreams):
#   grovepb/proto/grove/v1/*.proto              -> grovepb (messages: the
#                                                  prediction event, the model config)
#   api/oip/proto/inference/*.proto             -> api/oip/oippb (messages + gRPC,
#                                                  OIP v2 with Triton's additions)
#   api/sidecar/proto/inference_sidecar/*.proto -> api/sidecar/sidecarpb (messages +
#                                                  gRPC, B&A sidecar)
#   api/deeprec/proto/deeprec/*.proto,
#   api/deeprec/proto/grove/deeprec/v1/*.proto  -> api/deeprec/deeprecpb (messages +
#                                                  gRPC, DeepRec's processor protocol
#                                                  and Grove's service)
#   cluster/forward/proto/grove/cluster/v1/*.proto -> cluster/forward/forwardpb
#                                                  (messages + gRPC, node-to-node)
#   api/outcomes/proto/grove/v1/*.proto         -> api/outcomes/outcomespb (gRPC
#                                                  service Outcomes and its answer;
#                                                  imports grove/v1/outcome.proto
#                                                  from grovepb/proto)
# A file's name relative to its proto/ folder (grove/v1/prediction_event.proto)
# is the name it is registered under, and how the others import it.
# Installs what is missing first: Debian's protoc (protobuf-compiler, with the
# well-known types from libprotobuf-dev), protoc-gen-go at the version of
# google.golang.org/protobuf that go.mod requires, so the generated code and
# the runtime always match, and protoc-gen-go-grpc at a pinned version (its
# module is versioned apart from google.golang.org/grpc; the pinned one needs
# grpc >= v1.81, go.mod has a newer one). Run from anywhere; the output is
# committed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh protobuf-compiler libprotobuf-dev

bindir="$(go env GOPATH)/bin"

# protoc-gen-go, pinned to the runtime version in go.mod.
version=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
gen="$bindir/protoc-gen-go"
if ! [ -x "$gen" ] || [ "$("$gen" --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
  echo "installing protoc-gen-go $version"
  GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$version"
fi

# protoc-gen-go-grpc, pinned (an exact version: the module proxy may refuse
# @latest). `protoc-gen-go-grpc --version` prints "protoc-gen-go-grpc 1.6.2".
grpc_gen_version=v1.6.2
gen_grpc="$bindir/protoc-gen-go-grpc"
if ! [ -x "$gen_grpc" ] || [ "v$("$gen_grpc" --version 2>/dev/null | awk '{print $2}')" != "$grpc_gen_version" ]; then
  echo "installing protoc-gen-go-grpc $grpc_gen_version"
  GOFLAGS=-mod=mod go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$grpc_gen_version"
fi

# One run per proto/ folder: protoc-gen-go writes the messages of each file,
# protoc-gen-go-grpc the client and server stubs of each file that declares a
# service (it writes nothing for the others, e.g. grove/v1).
# grovepb/proto is on every run's path after the root's own folder, so
# that a protocol's schema can import Grove's messages (grove/v1/...);
# only the root's own files are generated.
roots=(grovepb/proto api/oip/proto api/sidecar/proto api/deeprec/proto cluster/forward/proto api/outcomes/proto)
for root in "${roots[@]}"; do
  protoc \
    --plugin=protoc-gen-go="$gen" \
    --plugin=protoc-gen-go-grpc="$gen_grpc" \
    --proto_path="$root" \
    --proto_path=grovepb/proto \
    --proto_path=/usr/include \
    --go_out=. \
    --go_opt=module=github.com/groveml/grove \
    --go-grpc_out=. \
    --go-grpc_opt=module=github.com/groveml/grove \
    $(cd "$root" && find . -name '*.proto' | sort | sed 's|^\./||')
done
echo "generated: $(find grovepb api/oip/oippb api/sidecar/sidecarpb api/deeprec/deeprecpb cluster/forward/forwardpb api/outcomes/outcomespb -name '*.pb.go' | sort | tr '\n' ' ')"
