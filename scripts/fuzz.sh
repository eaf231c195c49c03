#!/usr/bin/env bash
# Runs every fuzz target of the module (each func Fuzz* of a _test.go
# file) for FUZZTIME each (default 30s), and lists those that failed at
# the end; a failure leaves its input in the package's
# testdata/fuzz/<target>/, where go test then replays it as a seed.
# FUZZMINIMIZETIME (default 5s) bounds the time spent shrinking each new
# input, which by default may take a minute and leave a short run no time
# to fuzz. Run from the module's root (make fuzz).
#
# Go 1.26's fuzzing coordinator can fail a target with a bare "context
# deadline exceeded" at the end of -fuzztime, having found nothing (a race
# in its shutdown, go.dev/issue/75804, fixed in Go 1.27). A run that ends
# so, writes no new input and replays its corpus cleanly counts as passed
# and is listed as such; any other failure is one.
set -uo pipefail
fuzztime=${FUZZTIME:-30s}
minimize=${FUZZMINIMIZETIME:-5s}
go=${GO:-go}
failed=()
raced=()
n=0
# inputs lists the saved inputs of a target, one per line.
inputs() { ls "$1" 2>/dev/null; }
while IFS= read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    n=$((n + 1))
    echo "== $pkg $target"
    corpus="$pkg/testdata/fuzz/$target"
    before=$(inputs "$corpus")
    out=$(mktemp)
    if "$go" test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
      rm -f "$out"
      continue
    fi
    if [ "$(inputs "$corpus")" = "$before" ] && grep -q '^    context deadline exceeded$' "$out" &&
      ! grep -q -e '^panic:' -e 'Failing input written to' "$out" &&
      "$go" test "$pkg" -run "^${target}\$" >/dev/null 2>&1; then
      echo "fuzz: $pkg $target ended with the coordinator's deadline race (no input written, corpus replays): not a finding"
      raced+=("$pkg $target")
    else
      failed+=("$pkg $target")
    fi
    rm -f "$out"
  done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^\./\.' | sort)
if ((${#raced[@]} > 0)); then
  echo "fuzz: ${#raced[@]} targets ended with the coordinator's deadline race and nothing found:"
  printf '  %s\n' "${raced[@]}"
fi
if ((${#failed[@]} > 0)); then
  echo "fuzz: ${#failed[@]} of $n targets failed:"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "fuzz: $n targets, none failed"
