#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: unit tests and end-to-end tests
# that attach the real tprof to real Python/torch processes (torch 1.13 on the host and
# torch 2.6 and torch 2.14 in Debian trixie and sid roots, built once and cached, and overlays
# of them with inductor's C++ toolchain), then the
# unit, streaming, refusal and record tests under ASan and UBSan (scripts/sanitize.sh) and a
# short run of each fuzz target (scripts/fuzz.sh, TPROF_FUZZ_SECONDS each, default 10).
# Arguments go to the first ctest (bash scripts/test.sh -R Report), and then only it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
bash scripts/make-torch-root.sh trixie >/dev/null
bash scripts/make-torch-root.sh sid >/dev/null
bash scripts/make-inductor-root.sh trixie >/dev/null
bash scripts/make-inductor-root.sh sid >/dev/null
if [ $# -gt 0 ]; then
  cd build && exec ctest --output-on-failure --timeout 900 "$@"
fi

# Every part runs even when one before it failed, so that one CI run names every failing part.
failed=()
# Unit tests two at a time (the machine's cores); the end-to-end tests run one at a time anyway.
# ctest keeps only its last run's failures, so each part's names are read right after it.
failed_tests() { tr '\n' ' ' <build/Testing/Temporary/LastTestsFailed.log 2>/dev/null; }
# What the failed tests printed, shown again at the end: a CI log is read from its tail.
digest=build/failure-digest.txt
: >"$digest"
note_failures() { awk -f scripts/failure-digest.awk build/Testing/Temporary/LastTest.log >>"$digest" || true; }
(cd build && ctest --output-on-failure --timeout 900 -j2 -L unit) ||
  { failed+=("unit tests (build/, ctest -L unit): $(failed_tests)"); note_failures; }
(cd build && ctest --output-on-failure --timeout 900 -LE unit) ||
  { failed+=("end-to-end tests (build/, ctest -LE unit): $(failed_tests)"); note_failures; }
bash scripts/sanitize.sh ||
  { failed+=("tests under ASan+UBSan (scripts/sanitize.sh, build-asan/)"); cat build-asan/failure-digest.txt >>"$digest" || true; }
bash scripts/fuzz.sh "${TPROF_FUZZ_SECONDS:-10}" || failed+=("fuzzing (scripts/fuzz.sh, build-fuzz/; reproducers above)")
if [ ${#failed[@]} -gt 0 ]; then
  if [ -s "$digest" ]; then
    echo "test.sh: what the failed tests printed (in full above, where each ran):" >&2
    head -n 150 "$digest" >&2
  fi
  printf 'test.sh: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test.sh: all passed"
