#!/usr/bin/env bash
# Builds tprof's libFuzzer targets (tests/fuzz) with clang, ASan and UBSan into build-fuzz/
# and runs each for SECONDS (default 60) on its seed corpus and regressions. Exits non-zero if
# any target crashed, hung or ran out of memory, naming the input that did it; reproduce with
#   build-fuzz/tests/fuzz/fuzz_<target> <input>
# and, once fixed, keep the input as tests/fuzz/regressions/<target>/<name> (a unit test replays it).
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     TARGET: recover_trace recover_et report record_decoder
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(recover_trace recover_et report record_decoder)
build=build-fuzz

log() { printf 'fuzz: %s\n' "$*" >&2; }

# -O1 and line tables only, as OSS-Fuzz builds: fast to build, and file:line in every report.
optimize="-O1 -gline-tables-only -DNDEBUG"
cmake -S . -B "$build" -DTPROF_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

# Runs one target; its log is $build/fuzz-runs/<target>.log. New inputs go to a corpus in the
# build tree (the seeds in the source tree stay as they are), what failed to $build/crashes.
run_target() {
  local target=$1 runs=$build/fuzz-runs
  local corpus=$runs/corpus/$target crashes=$build/crashes/$target log=$runs/$target.log
  local inputs=(tests/fuzz/corpus/"$target")
  [ -d tests/fuzz/regressions/"$target" ] && inputs+=(tests/fuzz/regressions/"$target")
  local dict=()
  [ "$target" = record_decoder ] || dict=(-dict=tests/fuzz/json.dict)
  mkdir -p "$corpus" "$crashes" "$runs/tmp"
  # A reader that allocates GBs for a few KB of input is a finding too (-rss_limit_mb,
  # -malloc_limit_mb); so is one input taking over 10 s.
  TMPDIR=$runs/tmp "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=10 -max_len=65536 -print_final_stats=1 -artifact_prefix="$crashes/" "${dict[@]}" \
    "$corpus" "${inputs[@]}" >"$log" 2>&1
}

failed=()
for target in "${targets[@]}"; do
  log "$target: ${seconds}s"
  if run_target "$target"; then
    log "$target: ok, $(grep -E '^#[0-9]+[[:space:]]+DONE' "$build/fuzz-runs/$target.log" | tail -n1)"
    continue
  fi
  failed+=("$target")
  log "$target: FAILED: $(grep -m1 -E 'ERROR: |runtime error:|^recover wrote|^the trace written|terminate called' "$build/fuzz-runs/$target.log" || echo 'see log')"
  log "$target: reproducer: $(grep -oE 'Test unit written to .*' "$build/fuzz-runs/$target.log" | sed 's/Test unit written to //' | tail -n1)"
  log "$target: log: $build/fuzz-runs/$target.log"
done

[ ${#failed[@]} -eq 0 ] || { log "failed: ${failed[*]}"; exit 1; }
