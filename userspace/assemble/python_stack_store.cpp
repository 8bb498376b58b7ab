#include "userspace/assemble/python_stack_store.h"

#include <bpf/bpf.h>

#include <memory>

namespace tprof {
namespace {

model::PythonStack printable_stack(const ResolvedStack& stack) {
  model::PythonStack frames;
  frames.reserve(stack.size());
  for (const ResolvedFrame& frame : stack) frames.push_back({frame.file, frame.line, frame.function});
  return frames;
}

}  // namespace

PythonStackStore::PythonStackStore(int stacks_map_fd, Resolver resolve)
    : stacks_map_fd_(stacks_map_fd), resolve_(std::move(resolve)) {}

void PythonStackStore::resolve_pending() {
  if (pending_.empty()) return;
  auto raw = std::make_unique<python_stack>();  // 4 KiB: not on the stack
  for (uint64_t stack_id : pending_) {
    if (stacks_.size() >= kMaxStacks || bpf_map_lookup_elem(stacks_map_fd_, &stack_id, raw.get()) != 0) {
      ++lost_;
      continue;
    }
    ResolvedStack frames = resolve_(*raw);
    model::PythonStack printable = printable_stack(frames);
    stacks_.emplace(stack_id, StoredStack{std::move(frames), std::move(printable)});
  }
  pending_.clear();
}

const StoredStack* PythonStackStore::find(uint64_t stack_id) const {
  auto found = stacks_.find(stack_id);
  return found == stacks_.end() ? nullptr : &found->second;
}

}  // namespace tprof
