#include "userspace/assemble/memory_tracker.h"

#include <algorithm>
#include <map>
#include <utility>

#include "userspace/assemble/span_closer.h"

namespace tprof {

std::optional<model::MemoryEvent> MemoryTracker::take(const OpEvent& record, const StoredStack* stack,
                                                      uint32_t operator_index, uint64_t time_ns) {
  if (record.memory_device_type != 0) return take_device_block(record, same_frames_as(stack));
  const StoredStack* site_stack = same_frames_as(stack);
  const std::optional<MemoryLedger::Change> change =
      record.memory_bytes > 0
          ? ledger_.allocate(record.memory_address, static_cast<uint64_t>(record.memory_bytes),
                             {site_stack, operator_index}, time_ns)
          : ledger_.free(record.memory_address);
  if (!change) return std::nullopt;
  ++(change->bytes > 0 ? allocations_ : frees_);
  return model::MemoryEvent{.time_ns = time_ns,
                            .tid = 0,
                            .address = record.memory_address,
                            .bytes = change->bytes,
                            .total_allocated = change->total_allocated,
                            .total_reserved = 0,
                            .device_type = 0,
                            .device_index = -1,
                            .external_id = 0,
                            .stack = site_stack ? &site_stack->printable : nullptr};
}

std::optional<model::MemoryEvent> MemoryTracker::take_device_block(const OpEvent& record, const StoredStack* stack) {
  ++device_events_;
  device_peak_allocated_ = std::max(device_peak_allocated_, static_cast<int64_t>(record.memory_total_allocated));
  return model::MemoryEvent{.time_ns = 0,
                            .tid = 0,
                            .address = record.memory_address,
                            .bytes = record.memory_bytes,
                            .total_allocated = static_cast<int64_t>(record.memory_total_allocated),
                            .total_reserved = static_cast<int64_t>(record.memory_total_reserved),
                            .device_type = record.memory_device_type,
                            .device_index = record.memory_device_index,
                            .external_id = 0,
                            .stack = stack ? &stack->printable : nullptr};
}

model::MemorySummary MemoryTracker::summary(std::optional<uint64_t> cycle_start_unix_ns) const {
  model::MemorySummary summary{.allocations = allocations_,
                               .frees = frees_,
                               .frees_of_unknown_blocks = ledger_.frees_of_unknown_blocks(),
                               .blocks_forgotten = ledger_.blocks_forgotten(),
                               .peak_allocated_bytes = ledger_.peak_allocated(),
                               .peak_unix_ns = ledger_.peak_time_ns(),
                               .allocated_at_end = ledger_.total_allocated(),
                               .peak_holders = holders_of(ledger_.peak_holders()),
                               .device_events = device_events_,
                               .device_peak_allocated_bytes = device_peak_allocated_,
                               .cycle_start_unix_ns = 0,
                               .live_from_earlier_cycles = {}};
  if (cycle_start_unix_ns) {
    summary.cycle_start_unix_ns = *cycle_start_unix_ns;
    summary.live_from_earlier_cycles = holders_of(ledger_.live_allocated_before(*cycle_start_unix_ns));
  }
  return summary;
}

// Groups of blocks as the summary names them, largest first: overloads of one op
// (aten::add.Tensor, aten::add.Scalar) make one group, as in the table.
std::vector<model::MemoryHolder> MemoryTracker::holders_of(const std::vector<MemoryLedger::Group>& groups) const {
  std::vector<model::MemoryHolder> holders;
  std::map<std::pair<std::string, const StoredStack*>, size_t> index_of;
  for (const MemoryLedger::Group& group : groups) {
    const std::string op =
        group.site.operator_index < operators_.size() ? operators_[group.site.operator_index].name : std::string();
    const auto [entry, is_new] = index_of.try_emplace({op, group.site.stack}, holders.size());
    if (is_new) {
      model::MemoryHolder& holder = holders.emplace_back();
      holder.op = op;
      if (group.site.stack) holder.stack = group.site.stack->printable;
    }
    holders[entry->second].bytes += group.bytes;
    holders[entry->second].blocks += group.blocks;
  }
  std::stable_sort(holders.begin(), holders.end(),
                   [](const model::MemoryHolder& a, const model::MemoryHolder& b) { return a.bytes > b.bytes; });
  return holders;
}

const StoredStack* MemoryTracker::same_frames_as(const StoredStack* stack) {
  if (!stack) return nullptr;
  const auto known = canonical_stacks_.find(stack);
  if (known != canonical_stacks_.end()) return known->second;
  std::string text;
  for (const model::PythonFrame& frame : stack->printable) {
    text += model::frame_label(frame);
    text += '\n';
  }
  const StoredStack* canonical = stacks_by_text_.try_emplace(std::move(text), stack).first->second;
  canonical_stacks_.emplace(stack, canonical);
  return canonical;
}

}  // namespace tprof
