// Copies the Python stacks the BPF walker stored (python_stacks map) into userspace and
// symbolizes them, once per distinct stack, while the target still runs: code objects are
// read from its memory, and the map is an LRU that makes room for newer stacks. BPF sends each
// new stack through the ring buffer too (add()); the map is looked up for those the ring lost.
// Holds at most kMaxStacks distinct stacks; past that, new ones are counted lost rather than
// grown into.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "model/trace_model.h"
#include "python_stack.h"
#include "symbolizer/python/python_stacks.h"

namespace tprof {

// A stack as the python timeline compares it and as exporters print it.
struct StoredStack {
  ResolvedStack frames;
  model::PythonStack printable;
};

class PythonStackStore {
 public:
  // A training loop shows a few thousand; a stack holds ~2 KiB, so this bounds the store near
  // 100 MiB.
  static constexpr size_t kMaxStacks = 50'000;

  using Resolver = std::function<ResolvedStack(const python_stack&)>;
  PythonStackStore(int stacks_map_fd, Resolver resolve);

  // A record referred to this stack; it is copied at the next resolve_pending().
  void note(uint64_t stack_id) {
    if (!stacks_.contains(stack_id)) pending_.insert(stack_id);
  }
  // A stack BPF sent through the ring buffer as it stored it: kept now, with no map lookup.
  void add(uint64_t stack_id, const python_stack& raw);
  // Copies and symbolizes every noted stack not seen before. Call after each drain.
  void resolve_pending();

  // Stable for the store's lifetime; null if the stack was never stored.
  const StoredStack* find(uint64_t stack_id) const;
  // Copies that failed, per resolve_pending(): the stack had left the map, or the store was full.
  uint64_t evicted() const { return evicted_; }
  uint64_t over_bound() const { return over_bound_; }
  uint64_t unresolved() const { return unresolved_; }  // copied, but no frame's code object could be read

 private:
  void store(uint64_t stack_id, const python_stack& raw);

  int stacks_map_fd_;
  Resolver resolve_;
  std::unordered_map<uint64_t, StoredStack> stacks_;
  std::unordered_set<uint64_t> pending_;
  uint64_t evicted_ = 0;
  uint64_t over_bound_ = 0;
  uint64_t unresolved_ = 0;
};

}  // namespace tprof
