#!/usr/bin/env bash
# Runs processor_test.c (no Go in it) against libgrove_processor.so:
#
#   processor/ctest/run.sh LIB [MEMCHECK_LIB]
#
#  1. full, on LIB: 8 threads x 1000+ calls on a TorchScript and an ONNX
#     model, outputs checked against Python's to 1e-5, every buffer
#     freed, and while they run a broken version 2 of each model dropped
#     into its directory (atomic rename), version 1 serving on, then a
#     good version 3, which takes over: 0 failed calls.
#  2. short, under valgrind memcheck, on MEMCHECK_LIB (default LIB): no
#     invalid read or write, and no definite leak of the API's buffers.
#     make test gives the library built without libtorch (-tags
#     grove_notorch, bin/notorch/): libtorch brings in libhwy (through
#     OpenCV and libjxl), whose initializer executes rdtscp, which
#     valgrind 3.19 cannot decode on some CPUs (virtual machines among
#     them, whether or not cpuid reports it); such a library runs the
#     ONNX model only (short-onnx). GODEBUG=cpu.rdtscp=off keeps the Go
#     runtime's clock off rdtscp too. valgrind.supp suppresses what
#     the Go runtime does in its own memory (memcheck does not know Go's
#     stacks and heap; Go's experimental -tags valgrind build makes
#     memcheck's leak check abort), what the ONNX Runtime binding keeps,
#     and two known glibc/cpuinfo reports; the outputs (written by
#     libc's memcpy into malloc'd buffers, read and free()d by the caller)
#     are checked, the caller's input is read by Go's copy, which is not.
set -euo pipefail
lib=$(realpath "$1")
memlib=$(realpath "${2:-$1}")
mode=short
if ! ldd "$memlib" | grep -q libtorch; then
  mode=short-onnx
fi
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
# TMPDIR: the processors' model caches (the library removes them at exit).
TMPDIR=$work/tmp GROVE_LOG_LEVEL=warn "$bin" "$lib" "$data" "$work/models" full

# The processors' model caches are removed at exit (atexit in the library).
if [ -n "$(ls -A "$work/tmp")" ]; then
  echo "FAIL: model caches left after the process exited:"; ls -la "$work/tmp"
  exit 1
fi
echo "PASS: no model cache left in \$TMPDIR after the process exited"

echo "== processor_test $mode under valgrind memcheck ($memlib)"
fresh
log=$work/valgrind.log
status=0
GODEBUG=cpu.rdtscp=off TMPDIR=$work/tmp GROVE_LOG_LEVEL=error valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
  --errors-for-leak-kinds=definite --suppressions="$here/valgrind.supp" --num-callers=40 --error-exitcode=3 \
  "$bin" "$memlib" "$data" "$work/models" "$mode" >"$log" 2>&1 || status=$?
grep -E '^short run|ERROR SUMMARY|definitely lost:' "$log" || true
# A library with libtorch (run.sh LIB alone) may stop with SIGILL in
# libhwy's initializer, before any of Grove's code runs: only that case
# is a skip.
if [ "$status" -eq 132 ] && grep -A1 'valgrind: Unrecognised instruction' "$log" | grep -q 'libhwy\.so'; then
  echo "SKIP: valgrind memcheck: valgrind cannot decode the rdtscp that libhwy (loaded by libtorch) executes when it loads on this CPU; give run.sh the library built with -tags grove_notorch"
  exit 0
fi
if [ "$status" -ne 0 ] || grep -qE 'Invalid (read|write)' "$log"; then
  cp "$log" "$(dirname "$lib")/processor_test.valgrind.log"
  echo "FAIL: valgrind memcheck (exit $status); its report (all of it in $(dirname "$lib")/processor_test.valgrind.log):"
  grep -E '^==[0-9]+== ' "$log" | grep -vE 'Warning: (set address range perms|client switching stacks)' | tail -150
  exit 1
fi
echo "PASS: valgrind memcheck: no invalid reads or writes, no definite leaks"
