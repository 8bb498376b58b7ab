#include "userspace/assemble/python_stack_store.h"

#include <bpf/bpf.h>

#include <memory>

namespace tprof {
namespace {

model::PythonStack printable_stack(const ResolvedStack& stack) {
  model::PythonStack frames;
  frames.reserve(stack.size());
  for (const ResolvedFrame& frame : stack) frames.push_back({frame.file, frame.line, frame.function, frame.qualified_name});
  return frames;
}

}  // namespace

PythonStackStore::PythonStackStore(int stacks_map_fd, Resolver resolve)
    : stacks_map_fd_(stacks_map_fd), resolve_(std::move(resolve)) {}

void PythonStackStore::add(uint64_t stack_id, const python_stack& raw) {
  // Past the bound it is left to resolve_pending(), which counts it lost if a record names it.
  if (stacks_.contains(stack_id) || stacks_.size() >= kMaxStacks) return;
  store(stack_id, raw);
  pending_.erase(stack_id);
}

// Only the stacks the ring buffer did not bring (it was full) are looked up in the map.
void PythonStackStore::resolve_pending() {
  if (pending_.empty()) return;
  auto raw = std::make_unique<python_stack>();  // 4 KiB: not on the stack
  for (uint64_t stack_id : pending_) {
    if (stacks_.size() >= kMaxStacks) {
      ++over_bound_;
      continue;
    }
    if (bpf_map_lookup_elem(stacks_map_fd_, &stack_id, raw.get()) != 0) {
      ++evicted_;
      continue;
    }
    store(stack_id, *raw);
  }
  pending_.clear();
}

void PythonStackStore::store(uint64_t stack_id, const python_stack& raw) {
  ResolvedStack frames = resolve_(raw);
  // Walked frames none of which could be named: its ops show an empty stack, said at the end.
  if (frames.empty() && raw.depth > 0) ++unresolved_;
  model::PythonStack printable = printable_stack(frames);
  stacks_.emplace(stack_id, StoredStack{std::move(frames), std::move(printable)});
}

const StoredStack* PythonStackStore::find(uint64_t stack_id) const {
  auto found = stacks_.find(stack_id);
  return found == stacks_.end() ? nullptr : &found->second;
}

}  // namespace tprof
