// The op arguments a recording could not read in full, counted by op and argument for the
// end-of-run report: a value written as unknown ("" in Concrete Inputs, "<Unknown>" in the ET)
// or a list cut short ("[1, 2, ...]") is never left unsaid.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "model/trace_sink.h"

namespace tprof {

class UnknownValuesSink final : public model::TraceSink {
 public:
  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t, const model::PythonSpan&) override {}
  void flow(const model::ForwardBackwardFlow&) override {}
  void finish(const model::RunSummary&) override {}

  uint64_t total() const { return total_; }
  // "3 values of 2 arguments: aten::lstm input 3 (Tensor[]) x2, ..."; empty when there are none.
  // The `limit` most frequent arguments are named.
  std::string describe(size_t limit = 8) const;

 private:
  // (op name, input or return, index, schema type) -> count
  std::map<std::tuple<std::string, bool, size_t, std::string>, uint64_t> counts_;
  uint64_t total_ = 0;
};

}  // namespace tprof
