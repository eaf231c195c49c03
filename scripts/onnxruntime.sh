#!/usr/bin/env bash
# Fetches the ONNX Runtime shared library that servables/onnx loads, and
# prints its path.
#
#   scripts/onnxruntime.sh      # -> .cache/onnxruntime/1.24.1/libonnxruntime.so.1
#
# The library comes from the npm package onnxruntime-node (Microsoft's own
# build, MIT licence), which ships it for linux/x64 and linux/arm64 under
# bin/napi-v6/linux/<arch>/. `npm pack` downloads the package tarball without
# installing it (no install scripts run); only libonnxruntime.so.1 is
# extracted, checked against the SHA-256 pinned below, and the tarball is
# deleted.
#
# Idempotent: when the library is already there with the pinned checksum it
# prints the path and exits without touching the network.
#
# Environment:
#   GROVE_ONNXRUNTIME_CACHE  cache root (default: <repo>/.cache/onnxruntime);
#                            the library goes to $GROVE_ONNXRUNTIME_CACHE/1.24.1/.
#                            Grove itself reads GROVE_ONNXRUNTIME_LIB: with a
#                            non-default cache, export
#                            GROVE_ONNXRUNTIME_LIB=$(scripts/onnxruntime.sh).
#
# The version is pinned to the ONNX Runtime C API that
# github.com/yalue/onnxruntime_go v1.27.0 (go.mod) is built against: change
# both together, with the checksums.
set -euo pipefail

ORT_VERSION=1.24.1
declare -A SHA256=(
  [x64]=53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4
  [arm64]=7954e8bdedb497f830c6a679e818d98399b7f4d81ade1126c3e0be74d28111ab
)

die() { echo "onnxruntime.sh: $*" >&2; exit 1; }

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) arch=x64 ;;
  Linux/aarch64 | Linux/arm64) arch=arm64 ;;
  *) die "no ONNX Runtime build for $(uname -s)/$(uname -m) in onnxruntime-node (linux x86_64 and aarch64 only)" ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${GROVE_ONNXRUNTIME_CACHE:-$repo/.cache/onnxruntime}"
dir="$cache/$ORT_VERSION"
lib="$dir/libonnxruntime.so.1"
want="${SHA256[$arch]}"

sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$lib" ] && [ "$(sha "$lib")" = "$want" ]; then
  echo "$lib"
  exit 0
fi

# A fresh Debian 12 has no npm: install Debian's (any npm on the PATH will do,
# e.g. the one bundled with a nodejs package from elsewhere).
command -v npm >/dev/null || "$repo/scripts/deps.sh" npm >&2
command -v npm >/dev/null || die "npm is needed to fetch onnxruntime-node@$ORT_VERSION (Node.js's package manager)"
mkdir -p "$dir"
tmp="$(mktemp -d "$dir/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "fetching ONNX Runtime $ORT_VERSION (npm package onnxruntime-node@$ORT_VERSION, ~85 MB) into $dir" >&2
# --ignore-scripts: npm pack of a registry spec runs none anyway; say so.
(cd "$tmp" && npm pack "onnxruntime-node@$ORT_VERSION" --ignore-scripts --loglevel=error >/dev/null) ||
  die "npm pack onnxruntime-node@$ORT_VERSION failed"
tgz="$tmp/onnxruntime-node-$ORT_VERSION.tgz"
[ -f "$tgz" ] || die "npm pack did not write $tgz"
member="package/bin/napi-v6/linux/$arch/libonnxruntime.so.1"
tar -xzf "$tgz" -C "$tmp" "$member" || die "$member is not in onnxruntime-node-$ORT_VERSION.tgz"
got="$(sha "$tmp/$member")"
[ "$got" = "$want" ] || die "$member has SHA-256 $got, want $want"
chmod 0644 "$tmp/$member"
mv -f "$tmp/$member" "$lib"   # atomic within one file system
echo "$lib"
