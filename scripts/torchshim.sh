#!/usr/bin/env bash
# Builds libgrove_torch.so, Grove's C API over libtorch (servables/torch/shim),
# which grove opens when a TorchScript model first loads, and prints its path.
#
#   scripts/torchshim.sh      # -> .cache/torchshim/<version>/libgrove_torch.so
#
# <version> is the first 16 hex digits of the SHA-256 of shim.h followed by
# shim.cc: the Go side computes the same from the sources it embeds, looks
# for that directory, and opens only a library that says it is that version
# (grove_shim_version), so a library of other sources is never used.
#
# Idempotent: when the library of the current sources is there it prints the
# path and builds nothing. Needs g++ and Debian's libtorch-dev (make deps).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$repo/servables/torch/shim"
version="$(cat "$src/shim.h" "$src/shim.cc" | sha256sum | cut -c1-16)"
dir="$repo/.cache/torchshim/$version"
lib="$dir/libgrove_torch.so"

if [[ ! -f "$lib" ]]; then
  command -v g++ >/dev/null || { echo "torchshim.sh: g++ is missing: make deps installs it" >&2; exit 1; }
  [[ -d /usr/include/torch ]] || { echo "torchshim.sh: libtorch's headers are missing: make deps installs Debian's libtorch-dev" >&2; exit 1; }
  mkdir -p "$dir"
  tmp="$(mktemp "$dir/.libgrove_torch.so.XXXXXX")"
  trap 'rm -f "$tmp"' EXIT
  g++ -std=c++17 -O2 -fPIC -shared -fopenmp -DGROVE_SHIM_VERSION="\"$version\"" \
    -I/usr/include/torch/csrc/api/include -o "$tmp" "$src/shim.cc" \
    -Wl,--no-undefined -ltorch -ltorch_cpu -lc10 -lgomp
  chmod 0755 "$tmp"
  mv -f "$tmp" "$lib"
  trap - EXIT
fi
echo "$lib"
