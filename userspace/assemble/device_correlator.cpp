#include "userspace/assemble/device_correlator.h"

#include <algorithm>
#include <cstring>

#include "symbolizer/cuda/cuda_names.h"

namespace tprof {
namespace {

constexpr uint32_t kNoStream = UINT32_MAX;  // CUPTI's "not applicable" for a sync's stream
constexpr float kWarpSize = 32;  // Kineto's warps per SM divide by this, whatever the device says

bool is_api_call(const model::DeviceActivity& activity) {
  return activity.kind == model::DeviceActivityKind::kRuntime || activity.kind == model::DeviceActivityKind::kDriver;
}

// CUPTI reports every API call; a trace shows those torch.profiler shows.
bool shown_as_torch_profiler_would(const device_activity& record) {
  switch (record.kind) {
    case DEVICE_ACTIVITY_RUNTIME:
      return symbolizer::torch_profiler_shows_runtime_api(record.cbid);
    case DEVICE_ACTIVITY_DRIVER:
      return symbolizer::torch_profiler_shows_driver_api(record.cbid);
    default:
      return true;
  }
}

}  // namespace

DeviceCorrelator::DeviceCorrelator(MonotonicToUnix clock, Callbacks callbacks, model::TraceSink& sink)
    : clock_(clock), callbacks_(std::move(callbacks)), sink_(sink) {}

void DeviceCorrelator::range_closed(uint32_t tid, const model::OpSpan& span) {
  closed_[tid][{span.start_ns, span.depth}] = {span.end_ns, span.record_id};
}

model::DeviceActivity DeviceCorrelator::to_model(const device_activity& record) {
  model::DeviceActivity activity;
  activity.start_ns = clock_.to_unix(record.start_ns);
  activity.end_ns = std::max(clock_.to_unix(record.end_ns), activity.start_ns);
  activity.device = record.device;
  activity.context = record.context;
  activity.stream = record.stream == kNoStream ? -1 : record.stream;
  activity.correlation = record.correlation;
  activity.bytes = record.bytes;
  switch (record.kind) {
    case DEVICE_ACTIVITY_KERNEL: {
      activity.kind = model::DeviceActivityKind::kKernel;
      auto [name, is_new] = kernel_names_.try_emplace(record.name);
      if (is_new) name->second = symbolizer::demangled_kernel_name(callbacks_.target_string(record.name));
      activity.name = name->second;
      std::copy(std::begin(record.grid), std::end(record.grid), activity.grid);
      std::copy(std::begin(record.block), std::end(record.block), activity.block);
      activity.registers_per_thread = record.registers_per_thread;
      activity.shared_memory = record.shared_memory;
      estimate_occupancy(record, activity);
      break;
    }
    case DEVICE_ACTIVITY_MEMCPY:
      activity.kind = model::DeviceActivityKind::kMemcpy;
      activity.name = symbolizer::memcpy_name(record.copy_kind, record.source_memory, record.target_memory);
      break;
    case DEVICE_ACTIVITY_MEMSET:
      activity.kind = model::DeviceActivityKind::kMemset;
      activity.name = symbolizer::memset_name(record.target_memory);
      break;
    case DEVICE_ACTIVITY_SYNC:
      activity.kind = model::DeviceActivityKind::kSync;
      activity.name = symbolizer::synchronization_name(record.copy_kind);
      break;
    case DEVICE_ACTIVITY_DRIVER:
      activity.kind = model::DeviceActivityKind::kDriver;
      activity.name = symbolizer::cuda_driver_api_name(record.cbid);
      activity.cbid = record.cbid;
      activity.tid = callbacks_.os_thread(record.thread);
      break;
    default:
      activity.kind = model::DeviceActivityKind::kRuntime;
      activity.name = symbolizer::cuda_runtime_api_name(record.cbid);
      activity.cbid = record.cbid;
      activity.tid = callbacks_.os_thread(record.thread);
      break;
  }
  return activity;
}

// Kineto's estimates (DeviceProperties.cpp, CuptiActivity.cpp): the grid spread over every SM,
// and of that, what the occupancy limit lets reside at once, as a share of the SM's threads.
void DeviceCorrelator::estimate_occupancy(const device_activity& kernel, model::DeviceActivity& activity) const {
  const auto device = devices_.find(kernel.device);
  if (device == devices_.end() || device->second.multiprocessors == 0) return;
  const model::DeviceProperties& gpu = device->second;
  const float blocks = static_cast<float>(kernel.grid[0]) * static_cast<float>(kernel.grid[1]) *
                       static_cast<float>(kernel.grid[2]);
  const float threads_per_block = static_cast<float>(kernel.block[0]) * static_cast<float>(kernel.block[1]) *
                                  static_cast<float>(kernel.block[2]);
  activity.has_occupancy = true;
  activity.blocks_per_sm = blocks / static_cast<float>(gpu.multiprocessors);
  activity.warps_per_sm = activity.blocks_per_sm * threads_per_block / kWarpSize;
  if (kernel.active_blocks_per_sm == 0 || gpu.max_threads_per_multiprocessor == 0) return;
  const float resident_blocks = std::min(activity.blocks_per_sm, static_cast<float>(kernel.active_blocks_per_sm));
  const float occupancy = resident_blocks * threads_per_block / static_cast<float>(gpu.max_threads_per_multiprocessor);
  activity.achieved_occupancy_percent = static_cast<int>(0.5f + occupancy * 100.0f);
}

void DeviceCorrelator::add_device(const device_properties& record) {
  model::DeviceProperties device{
      .id = record.device,
      .name = callbacks_.target_string(record.name),
      .total_global_memory = record.total_global_memory,
      .compute_major = record.compute_major,
      .compute_minor = record.compute_minor,
      .max_threads_per_block = record.max_threads_per_block,
      .max_threads_per_multiprocessor = record.max_threads_per_multiprocessor,
      .registers_per_block = record.registers_per_block,
      .registers_per_multiprocessor = record.registers_per_multiprocessor,
      .warp_size = record.warp_size,
      .shared_memory_per_block = record.shared_memory_per_block,
      .shared_memory_per_multiprocessor = record.shared_memory_per_multiprocessor,
      .shared_memory_per_block_optin = record.shared_memory_per_block_optin,
      .multiprocessors = record.multiprocessors};
  // The library resends its GPUs at every attach; a session reports each once.
  if (!devices_.try_emplace(device.id, device).second) return;
  ++counts_.devices;
  sink_.device_properties(device);
}

void DeviceCorrelator::add(const device_activity& record) {
  if (record.kind == DEVICE_ACTIVITY_DEVICE) {
    device_properties properties;
    std::memcpy(&properties, &record, sizeof(properties));
    add_device(properties);
    return;
  }
  if (record.kind == DEVICE_ACTIVITY_DROPPED) {
    counts_.dropped_by_cupti += record.bytes;
    return;
  }
  if (record.kind == DEVICE_ACTIVITY_REFUSED) {
    counts_.refusal = static_cast<int32_t>(record.bytes);
    return;
  }
  if (record.kind == DEVICE_ACTIVITY_UNTIMED) {
    counts_.untimed += record.bytes;
    return;
  }
  if (record.kind == DEVICE_ACTIVITY_HANDED_OVER) {
    counts_.handed_over_ns = record.start_ns;
    return;
  }
  if (!shown_as_torch_profiler_would(record)) {
    ++counts_.api_calls_hidden;
    return;
  }
  waiting_.push_back(to_model(record));
  if (waiting_.size() <= kMaxWaiting) return;
  model::DeviceActivity oldest = std::move(waiting_.front());
  waiting_.pop_front();
  is_api_call(oldest) ? hand_on_api_call(oldest) : hand_on_gpu_activity(oldest);
}

// The innermost closed range of `tid` that holds [start, end]: among ranges in (start, depth)
// order, the last one at or before `start` that ends at or after `end` (ranges of one thread
// nest, so a later-starting one that holds it is inside an earlier one).
uint64_t DeviceCorrelator::enclosing_range(uint32_t tid, uint64_t start_ns, uint64_t end_ns) const {
  if (const auto thread = closed_.find(tid); thread != closed_.end()) {
    auto at = thread->second.upper_bound({start_ns, UINT32_MAX});
    for (size_t scanned = 0; at != thread->second.begin() && scanned < kMaxRangesScanned; ++scanned) {
      --at;
      if (at->second.end_ns >= end_ns) return at->second.record_id;
    }
  }
  return callbacks_.open_range ? callbacks_.open_range(tid, start_ns) : 0;
}

void DeviceCorrelator::hand_on_api_call(model::DeviceActivity& call) {
  ++counts_.api_calls;
  if (call.tid == 0) {
    // No thread to put it on; what it launched goes out unlinked.
    ++counts_.api_calls_without_thread;
    return;
  }
  call.external_id = enclosing_range(call.tid, call.start_ns, call.end_ns);
  if (call.external_id != 0) ++counts_.api_calls_in_ops;
  api_calls_[call.correlation] = {call.external_id, call.tid, call.start_ns, call.end_ns};
  sink_.device_activity(call);
}

void DeviceCorrelator::hand_on_gpu_activity(model::DeviceActivity& activity) {
  if (const auto call = api_calls_.find(activity.correlation); call != api_calls_.end()) {
    activity.external_id = call->second.external_id;
    activity.launch_tid = call->second.tid;
    activity.launch_start_ns = call->second.start_ns;
    ++counts_.linked;
  }
  switch (activity.kind) {
    case model::DeviceActivityKind::kKernel: ++counts_.kernels; break;
    case model::DeviceActivityKind::kSync: ++counts_.syncs; break;
    default: ++counts_.copies; break;
  }
  sink_.device_activity(activity);
}

void DeviceCorrelator::advance(uint64_t watermark_monotonic_ns) {
  const uint64_t watermark_ns = clock_.to_unix(watermark_monotonic_ns);
  hand_on_ready(watermark_ns, /*everything=*/false);
  if (watermark_ns > kHistoryNs) forget_before(watermark_ns - kHistoryNs);
}

void DeviceCorrelator::finish() { hand_on_ready(0, /*everything=*/true); }

void DeviceCorrelator::hand_on_ready(uint64_t watermark_ns, bool everything) {
  // API calls first, so that the GPU activity they launched finds them in the same pass.
  std::deque<model::DeviceActivity> still_waiting;
  for (model::DeviceActivity& activity : waiting_) {
    if (is_api_call(activity) && (everything || activity.end_ns <= watermark_ns)) {
      hand_on_api_call(activity);
    } else {
      still_waiting.push_back(std::move(activity));
    }
  }
  waiting_.clear();
  for (model::DeviceActivity& activity : still_waiting) {
    const bool ready = everything || api_calls_.contains(activity.correlation) ||
                       activity.end_ns + kLaunchWaitNs <= watermark_ns;
    if (!is_api_call(activity) && ready) {
      hand_on_gpu_activity(activity);
    } else {
      waiting_.push_back(std::move(activity));
    }
  }
}

void DeviceCorrelator::forget_before(uint64_t unix_ns) {
  for (auto& [tid, ranges] : closed_) ranges.erase(ranges.begin(), ranges.lower_bound({unix_ns, 0}));
  std::erase_if(api_calls_, [&](const auto& entry) { return entry.second.end_ns < unix_ns; });
}

}  // namespace tprof
