#include "userspace/forward_backward_links.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace tprof {
namespace {

struct SpanAt {
  uint32_t thread_index;
  uint32_t span_index;
};

}  // namespace

void link_forward_backward(model::Trace& trace) {
  // Forward ops by the node they created; nullopt once a second op claims the same number.
  std::unordered_map<int64_t, std::optional<SpanAt>> creators;
  for (uint32_t t = 0; t < trace.threads.size(); ++t) {
    const auto& spans = trace.threads[t].spans;
    for (uint32_t s = 0; s < spans.size(); ++s) {
      if (spans[s].sequence_number < 0 || trace.operators[spans[s].operator_index].kind != model::RangeKind::kOperator)
        continue;
      const auto [entry, is_new] = creators.try_emplace(spans[s].sequence_number, SpanAt{t, s});
      if (!is_new) entry->second.reset();
    }
  }
  for (uint32_t t = 0; t < trace.threads.size(); ++t) {
    const auto& spans = trace.threads[t].spans;
    for (uint32_t s = 0; s < spans.size(); ++s) {
      if (spans[s].sequence_number < 0 ||
          trace.operators[spans[s].operator_index].kind != model::RangeKind::kBackwardNode)
        continue;
      const auto creator = creators.find(spans[s].sequence_number);
      if (creator == creators.end() || !creator->second) continue;
      trace.forward_backward_links.push_back({creator->second->thread_index, creator->second->span_index, t, s});
    }
  }
  std::sort(trace.forward_backward_links.begin(), trace.forward_backward_links.end(),
            [&](const model::ForwardBackwardLink& a, const model::ForwardBackwardLink& b) {
              const uint64_t a_start = trace.threads[a.forward_thread_index].spans[a.forward_span_index].start_ns;
              const uint64_t b_start = trace.threads[b.forward_thread_index].spans[b.forward_span_index].start_ns;
              return std::tie(a_start, a.backward_thread_index, a.backward_span_index) <
                     std::tie(b_start, b.backward_thread_index, b.backward_span_index);
            });
}

}  // namespace tprof
