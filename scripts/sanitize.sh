#!/usr/bin/env bash
# Builds the host code with ASan and UBSan into build-asan/ (the BPF objects are built as
# always: clang for the bpf target, flags of their own) and runs the unit tests and the
# streaming, refusal and record end-to-end tests under them; the first error stops its test.
#   bash scripts/sanitize.sh     (after scripts/install-deps.sh; the e2e tests need root)
set -euo pipefail
cd "$(dirname "$0")/.."

flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 -g1: half the compile time of -O2 -g, and still file:line in every report.
optimize="-O1 -g1 -DNDEBUG"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  >/dev/null
cmake --build build-asan -j"$(nproc)" --target tprof unit_tests test_streaming_e2e test_attach_e2e test_record_e2e

# tprof started by the e2e tests inherits these.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd build-asan
status=0
# What the failed tests printed, for scripts/test.sh to show again at the end of its log.
: >failure-digest.txt
note_failures() { status=1; awk -f ../scripts/failure-digest.awk Testing/Temporary/LastTest.log >>failure-digest.txt || true; }
ctest --output-on-failure --timeout 900 -j2 -L unit || note_failures
ctest --output-on-failure --timeout 900 -R '^(StreamingOutput|RefusalTest|Record|Env)\.' || note_failures
exit "$status"
