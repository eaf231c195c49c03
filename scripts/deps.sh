#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet. Idempotent:
# with everything present it does nothing and needs no network.
#
# An install may switch the host's BLAS: a package that brings another
# build along (OpenBLAS's pthread build came with python3-xgboost on one
# host) takes over the libblas.so.3, liblapack.so.3 and libopenblas.so.0
# alternatives when its priority is higher (pthread's 100 over openmp's 95). Every BLAS and LAPACK
# alternative's selection is recorded before apt runs, and each one the
# install changed is set back to what it was, even when apt fails (one that
# did not exist before is left as apt made it). Nothing is recorded or set
# when nothing is missing.
#
# One install at a time: `make -j` runs several of these at once (make test:
# deps beside ui-deps; make bench: deps beside deps-bench), and apt-get fails
# at once when another holds its lock. The first to find something missing
# holds a lock on this script's file until it is done; the others wait for
# it and then look again at what is still missing.
set -euo pipefail
find_missing() {
  missing=()
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
}
find_missing "$@"
[ ${#missing[@]} -eq 0 ] && exit 0
exec 9<"${BASH_SOURCE[0]}"
flock 9
find_missing "$@"
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# blas_selections prints "name path" for each BLAS or LAPACK alternative.
blas_selections() {
  command -v update-alternatives >/dev/null || return 0
  update-alternatives --get-selections 2>/dev/null | awk '$1 ~ /blas|lapack/ {print $1, $3}'
}

# restore_blas sets each alternative in $before that now points elsewhere
# back to its recorded path, if that is still one of its choices.
restore_blas() {
  local name path query now
  while read -r name path; do
    [ -n "$name" ] || continue
    query=$(update-alternatives --query "$name" 2>/dev/null || true)
    now=$(awk '$1 == "Value:" {print $2}' <<<"$query")
    [ -n "$now" ] && [ "$now" != "$path" ] || continue
    if grep -qxF "Alternative: $path" <<<"$query"; then
      echo "setting $name back to $path (installing ${missing[*]} switched it to $now)"
      $sudo update-alternatives --quiet --set "$name" "$path"
    fi
  done <<<"$before"
}

before=$(blas_selections)
trap restore_blas EXIT
# 9<&-: a daemon a package's script starts must not hold the lock on.
$sudo apt-get update -qq 9<&-
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" 9<&-
