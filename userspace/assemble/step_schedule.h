// torch.profiler.schedule(wait, warmup, active, repeat, skip_first), counted in the steps tprof
// detects (ProfilerStep#N, N from 0): which steps a scheduled recording keeps, and where each
// cycle ends and is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tprof {

struct StepSchedule {
  enum class Action { kNone, kWarmup, kRecord, kRecordAndSave };  // torch's ProfilerAction

  uint64_t wait = 0;
  uint64_t warmup = 0;
  uint64_t active = 1;
  uint64_t repeat = 0;  // 0: cycles until stopped
  uint64_t skip_first = 0;

  // "wait=1,warmup=1,active=2,repeat=2[,skip_first=3]": wait, warmup and active are required,
  // active > 0. nullopt, with `error` saying why, for anything else.
  static std::optional<StepSchedule> parse(std::string_view text, std::string* error);

  // schedule_fn(step), exactly as torch's.
  Action action(uint64_t step) const;
  // The cycle (from 0) that `step` belongs to; only meaningful for steps that record.
  uint64_t cycle(uint64_t step) const { return (step - skip_first) / (wait + warmup + active); }
  // Whether `cycles` completed cycles are all there will be.
  bool finished_after(uint64_t cycles) const { return repeat > 0 && cycles >= repeat; }
  // The first and the last step `cycle` records (kRecord, then kRecordAndSave).
  uint64_t first_recorded_step(uint64_t cycle) const { return skip_first + cycle * (wait + warmup + active) + wait + warmup; }
  uint64_t last_recorded_step(uint64_t cycle) const { return first_recorded_step(cycle) + active - 1; }
  // The first cycle none of whose recorded steps has begun while step `running` runs; none once
  // repeat=R cycles are all past.
  std::optional<uint64_t> next_cycle_after(uint64_t running) const;
  // Whether step `step` records (kRecord or kRecordAndSave).
  bool records(uint64_t step) const;
  // Whether, once Optimizer.step calls have begun `begun` times (step `begun` - 1 or `begun`
  // runs), no recorded step runs: a window of ops closed now cuts none. Always, when cycles
  // have fewer than 2 steps between their recorded ones (there is no such moment to wait for).
  bool between_recorded_steps(uint64_t begun) const;
  std::string describe() const;  // "wait=1,warmup=1,active=2,repeat=2,skip_first=0"
};

}  // namespace tprof
