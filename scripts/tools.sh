#!/usr/bin/env bash
# Installs the Go command-line tools Grove's scripts and integration tests use,
# at pinned versions, into $(go env GOPATH)/bin. Idempotent: a tool already
# there at its pinned version (read from the binary with `go version -m`) is
# left alone, so a second run needs no network. Versions are exact because the
# module proxy may refuse @latest.
#
#   grpcurl             gRPC client for the OIP v2 and B&A sidecar services
#                       (plaintext; schemas from server reflection, or from the
#                       repo: -import-path api/oip/proto -proto inference/grpc_service.proto)
#
# The code generators (protoc-gen-go, protoc-gen-go-grpc) are pinned and
# installed by scripts/genproto.sh, not here.
#
# Usage: scripts/tools.sh            install what is missing
#        scripts/tools.sh --print    list the pinned tools and versions
set -euo pipefail
cd "$(dirname "$0")/.."

# binary name | main package | module | version
tools=(
  "grpcurl|github.com/fullstorydev/grpcurl/cmd/grpcurl|github.com/fullstorydev/grpcurl|v1.9.4"
)

bindir="$(go env GOPATH)/bin"
for t in "${tools[@]}"; do
  IFS='|' read -r name pkg mod version <<<"$t"
  if [ "${1:-}" = "--print" ]; then
    echo "$name $pkg@$version"
    continue
  fi
  bin="$bindir/$name"
  have=""
  if [ -x "$bin" ]; then
    have=$(go version -m "$bin" 2>/dev/null | awk -v m="$mod" '$1 == "mod" && $2 == m {print $3}')
  fi
  [ "$have" = "$version" ] && continue
  echo "installing $name $version${have:+ (found $have)}"
  GOFLAGS=-mod=mod go install "$pkg@$version"
done
