// Writes a PyTorch Execution Trace, schema "1.1.1-chakra.0.0.4" (../shared/docs/formats.md
// §3), as ranges close: the nested node layout that torch's ExecutionTraceObserver writes and
// that PARAM et_replay and Chakra accept. Ops and annotations become nodes whose rf_id equals
// the Chrome trace's "Record function id", so the two files link (§1.1, §4).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exporters/execution_trace_values.h"
#include "exporters/output_file.h"
#include "exporters/value_text_cache.h"
#include "model/trace_model.h"
#include "model/trace_sink.h"

namespace tprof::exporters {

// The schema string written at the top of the file.
inline constexpr const char* kExecutionTraceSchema = "1.1.1-chakra.0.0.4";

// What ends the node list: the process root node, finish_ts and the closing brace. `tprof
// recover` ends a partial file with it too, marking it recovered.
std::string execution_trace_tail(uint64_t finish_ts_ms, bool recovered);

// One node per line, written as each range closes (post-order, as torch writes them), in
// O(threads) memory besides the tensor ids. Node ids follow the entry order: 1 is the process
// root, a thread's root takes the thread's entry id, every range its record id (each plus
// one), so sorted by id they follow torch's habit of numbering at op enter. The process root
// comes last (it terminates the list, as in torch). Does not commit `out`.
class ExecutionTraceWriter final : public model::TraceSink {
 public:
  explicit ExecutionTraceWriter(OutputFile& out);

  void begin(const model::SessionInfo& session) override;
  void thread(const model::ThreadInfo& thread) override;
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t, const model::PythonSpan&) override {}  // not in the ET
  void flow(const model::ForwardBackwardFlow&) override {}           // seq_id links them there
  void flush() override;
  void finish(const model::RunSummary& summary) override;

  struct NodeFields;  // what one node carries; defined with the writer

 private:
  struct ThreadNodes {
    uint64_t root_id = 0;
    uint64_t logical_tid = 0;
  };
  struct OperatorText {
    const model::Operator* source = nullptr;  // the entry it was made from
    std::string name_json;
    std::string schema_json;
  };
  const ThreadNodes& thread_nodes(uint32_t tid);
  static uint64_t node_id(uint64_t entry_id);
  const OperatorText& operator_text(uint32_t index, const model::Operator& op);
  void append_arguments(const std::vector<model::Value>* values);

  OutputFile& out_;
  std::unordered_map<uint32_t, uint64_t> thread_entry_ids_;  // by OS tid, from thread()
  std::unordered_map<uint32_t, ThreadNodes> threads_;         // by OS tid, once a node was written
  uint64_t next_object_id_;
  TensorIds tensor_ids_{next_object_id_};
  ValueTextCache shapes_types_strides_;
  std::vector<OperatorText> operator_texts_;  // by operator index
  std::string line_;  // one node at a time, reused so that writing allocates nothing per node
};

// The whole trace, replayed through an ExecutionTraceWriter. Does not commit `out`.
void write_execution_trace(const model::Trace& trace, OutputFile& out);

}  // namespace tprof::exporters
