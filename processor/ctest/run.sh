#!/usr/bin/env bash
# Runs processor_test.c (no Go in it) against libgrove_processor.so:
#
#   processor/ctest/run.sh LIB
#
#  1. full, on LIB: 8 threads x 1000+ calls on a TorchScript and an ONNX
#     model, outputs checked against Python's to 1e-5, every buffer
#     freed, and while they run a broken version 2 of each model dropped
#     into its directory (atomic rename), version 1 serving on, then a
#     good version 3, which takes over: 0 failed calls. TMPDIR is relative
#     and the program changes its working directory to / before version 3:
#     the model caches still work and are removed at exit.
#  2. short-onnx, under valgrind memcheck, on LIB: no invalid read or
#     write, and no definite leak of the API's buffers. It calls the ONNX
#     model only, so the library never opens libtorch (libgrove_torch.so
#     is opened with the first TorchScript model): libtorch brings in
#     libhwy (through OpenCV and libjxl), whose initializer executes
#     rdtscp, which valgrind 3.19 cannot decode on some CPUs (virtual
#     machines among them, whether or not cpuid reports it).
#     GODEBUG=cpu.rdtscp=off keeps the Go runtime's clock off rdtscp too. valgrind.supp suppresses what
#     the Go runtime does in its own memory (memcheck does not know Go's
#     stacks and heap; Go's experimental -tags valgrind build makes
#     memcheck's leak check abort), what the ONNX Runtime binding keeps,
#     and two known glibc/cpuinfo reports; the outputs (malloc'd
#     buffers, read and free()d by the caller) are checked for their
#     size, reads past it and leaks, not for the definedness of their
#     bytes, which Go computed (processor_test.c's settle); Go's copies
#     (the caller's input in, the answers out) are not: memcheck at times
#     marks reused goroutine stack memory in Go's heap unaddressable or
#     undefined.
set -euo pipefail
lib=$(realpath "$1")
mode=short-onnx
here=$(cd "$(dirname "$0")" && pwd)
data=$(realpath "$here/../testdata/deeprec")
bin=$(dirname "$lib")/processor_test
gcc -O2 -Wall -Wextra -Werror -o "$bin" "$here/processor_test.c" -ldl -lpthread -lm

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fresh() {
  rm -rf "$work/models" "$work/tmp"
  mkdir -p "$work/models/torch" "$work/models/onnx" "$work/tmp"
  cp -r "$data/torch/1" "$work/models/torch/"
  cp -r "$data/onnx/1" "$work/models/onnx/"
}

echo "== processor_test full"
fresh
# TMPDIR: the processors' model caches (the library removes them at exit),
# relative to the directory the program starts in, which it leaves for /
# halfway (as a daemon does).
(cd "$work" && TMPDIR=tmp GROVE_LOG_LEVEL=warn "$bin" "$lib" "$data" "$work/models" full)

# The processors' model caches are removed at exit (atexit in the library).
if [ -n "$(ls -A "$work/tmp")" ]; then
  echo "FAIL: model caches left after the process exited:"; ls -la "$work/tmp"
  exit 1
fi
echo "PASS: no model cache left in \$TMPDIR after the process exited"

echo "== processor_test $mode under valgrind memcheck ($lib)"
fresh
log=$work/valgrind.log
status=0
GODEBUG=cpu.rdtscp=off TMPDIR=$work/tmp GROVE_LOG_LEVEL=error valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
  --errors-for-leak-kinds=definite --suppressions="$here/valgrind.supp" --num-callers=40 --error-exitcode=3 \
  "$bin" "$lib" "$data" "$work/models" "$mode" >"$log" 2>&1 || status=$?
grep -E '^short run|ERROR SUMMARY|definitely lost:' "$log" || true
if [ "$status" -ne 0 ] || grep -qE 'Invalid (read|write)' "$log"; then
  cp "$log" "$(dirname "$lib")/processor_test.valgrind.log"
  echo "FAIL: valgrind memcheck (exit $status); its report (all of it in $(dirname "$lib")/processor_test.valgrind.log):"
  grep -E '^==[0-9]+== ' "$log" | grep -vE 'Warning: (set address range perms|client switching stacks)' | tail -150
  exit 1
fi
echo "PASS: valgrind memcheck: no invalid reads or writes, no definite leaks"
