#include "userspace/assemble/step_schedule.h"

#include <charconv>
#include <map>

namespace tprof {
namespace {

bool parse_count(std::string_view text, uint64_t* value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::optional<StepSchedule> StepSchedule::parse(std::string_view text, std::string* error) {
  StepSchedule schedule;
  std::map<std::string_view, uint64_t*> fields = {{"wait", &schedule.wait},
                                                   {"warmup", &schedule.warmup},
                                                   {"active", &schedule.active},
                                                   {"repeat", &schedule.repeat},
                                                   {"skip_first", &schedule.skip_first}};
  std::map<std::string_view, bool> given;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    const size_t equals = item.find('=');
    const std::string_view name = item.substr(0, equals);
    const auto field = fields.find(name);
    if (equals == std::string_view::npos || field == fields.end()) {
      *error = "'" + std::string(item) + "' is not one of wait=N, warmup=N, active=N, repeat=N, skip_first=N";
      return std::nullopt;
    }
    if (!parse_count(item.substr(equals + 1), field->second)) {
      *error = "'" + std::string(item) + "': " + std::string(name) + " takes a whole number";
      return std::nullopt;
    }
    given[name] = true;
  }
  for (const std::string_view required : {"wait", "warmup", "active"}) {
    if (!given[required]) {
      *error = "missing " + std::string(required) + "=N (torch.profiler.schedule requires wait, warmup and active)";
      return std::nullopt;
    }
  }
  if (schedule.active == 0) {
    *error = "active must be at least 1";
    return std::nullopt;
  }
  return schedule;
}

StepSchedule::Action StepSchedule::action(uint64_t step) const {
  if (step < skip_first) return Action::kNone;
  step -= skip_first;
  const uint64_t steps_per_cycle = wait + warmup + active;
  if (repeat > 0 && step >= repeat * steps_per_cycle) return Action::kNone;  // torch: step / num_steps >= repeat
  const uint64_t in_cycle = step % steps_per_cycle;
  if (in_cycle < wait) return Action::kNone;
  if (in_cycle < wait + warmup) return Action::kWarmup;
  return in_cycle < steps_per_cycle - 1 ? Action::kRecord : Action::kRecordAndSave;
}

std::optional<uint64_t> StepSchedule::next_cycle_after(uint64_t running) const {
  const uint64_t steps_per_cycle = wait + warmup + active;
  const uint64_t first_offset = skip_first + wait + warmup;
  const uint64_t cycle = running < first_offset ? 0 : (running - first_offset) / steps_per_cycle + 1;
  if (finished_after(cycle)) return std::nullopt;
  return cycle;
}

bool StepSchedule::records(uint64_t step) const {
  const Action done = action(step);
  return done == Action::kRecord || done == Action::kRecordAndSave;
}

bool StepSchedule::between_recorded_steps(uint64_t begun) const {
  if (wait + warmup < 2) return true;
  return !records(begun) && (begun == 0 || !records(begun - 1));
}

std::string StepSchedule::describe() const {
  return "wait=" + std::to_string(wait) + ",warmup=" + std::to_string(warmup) + ",active=" + std::to_string(active) +
         ",repeat=" + std::to_string(repeat) + ",skip_first=" + std::to_string(skip_first);
}

}  // namespace tprof
