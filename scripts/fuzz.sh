#!/usr/bin/env bash
# Runs every fuzz target of the module (each func Fuzz* of a _test.go
# file) for FUZZTIME each (default 30s), and lists those that failed at
# the end; a failure leaves its input in the package's
# testdata/fuzz/<target>/, where go test then replays it as a seed.
# FUZZMINIMIZETIME (default 5s) bounds the time spent shrinking each new
# input, which by default may take a minute and leave a short run no time
# to fuzz. Run from the module's root (make fuzz).
set -uo pipefail
fuzztime=${FUZZTIME:-30s}
minimize=${FUZZMINIMIZETIME:-5s}
go=${GO:-go}
failed=()
n=0
while IFS= read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    n=$((n + 1))
    echo "== $pkg $target"
    if ! "$go" test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize"; then
      failed+=("$pkg $target")
    fi
  done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^\./\.' | sort)
if ((${#failed[@]} > 0)); then
  echo "fuzz: ${#failed[@]} of $n targets failed:"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "fuzz: $n targets, none failed"
