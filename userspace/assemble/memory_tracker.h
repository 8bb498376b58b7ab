// --memory: the allocators' records become [memory] events. A CPU block is sized and totalled
// by a MemoryLedger (a free's size is its allocation's; a free of a block never seen allocated
// is left out, as torch leaves out those from before profiling began); a device's comes sized
// and totalled by its allocator. Allocations are grouped by the op and the Python stack (its
// frames' text: stacks are stored per invocation) that made them, for the peak's holders and a
// --schedule cycle's leftovers. The span closer calls it in time order and attributes each
// event to the ranges open on its thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"
#include "userspace/assemble/memory_ledger.h"
#include "userspace/assemble/python_stack_store.h"

namespace tprof {

struct OpEvent;

class MemoryTracker {
 public:
  // `operators` names the ops of the summary's groups; it must outlive the tracker.
  explicit MemoryTracker(const std::vector<model::Operator>& operators) : operators_(operators) {}

  // The event a memory record makes, its thread, range and time not filled in; none when it is
  // left out. `stack`: the allocating thread's (allocations only); `operator_index`: the
  // innermost range open there (UINT32_MAX: none).
  std::optional<model::MemoryEvent> take(const OpEvent& record, const StoredStack* stack, uint32_t operator_index,
                                         uint64_t time_ns);

  // What the allocators did so far; with `cycle_start_unix_ns`, also the CPU blocks still live
  // that were allocated before it.
  model::MemorySummary summary(std::optional<uint64_t> cycle_start_unix_ns) const;

 private:
  std::optional<model::MemoryEvent> take_device_block(const OpEvent& record, const StoredStack* stack);
  const StoredStack* same_frames_as(const StoredStack* stack);
  std::vector<model::MemoryHolder> holders_of(const std::vector<MemoryLedger::Group>& groups) const;

  const std::vector<model::Operator>& operators_;
  MemoryLedger ledger_;
  uint64_t allocations_ = 0;  // CPU [memory] events handed on
  uint64_t frees_ = 0;
  uint64_t device_events_ = 0;
  int64_t device_peak_allocated_ = 0;
  // Per stored stack, the first stored with the same frames (as many entries as the store holds
  // stacks at most), and that one by its frames' text.
  std::unordered_map<const StoredStack*, const StoredStack*> canonical_stacks_;
  std::unordered_map<std::string, const StoredStack*> stacks_by_text_;
};

}  // namespace tprof
