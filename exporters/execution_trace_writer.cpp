#include "exporters/execution_trace_writer.h"

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exporters/execution_trace_values.h"
#include "exporters/json_writer.h"
#include "model/trace_sink.h"

namespace tprof::exporters {
namespace {

// Root node names as torch writes them; PARAM finds thread roots by this exact name and
// Chakra starts its traversal from them (formats.md §3.3).
constexpr std::string_view kProcessRootName = "[pytorch|profiler|execution_trace|process]";
constexpr std::string_view kThreadRootName = "[pytorch|profiler|execution_trace|thread]";
constexpr uint64_t kProcessRootId = 1;

// at::RecordScope values (formats.md §3.3): dispatcher ops and the autograd engine's
// evaluate_function ranges are FUNCTION, backward nodes BACKWARD_FUNCTION; record_function,
// ProfilerStep#N and the root nodes are USER_SCOPE.
constexpr uint64_t kFunctionScope = 0;
constexpr uint64_t kBackwardFunctionScope = 1;
constexpr uint64_t kUserScope = 7;
constexpr int64_t kUnknownSequenceId = -1;

// torch's form for a node without loggable arguments (its root nodes); strides are required
// by PARAM's 1.1.1 parser even when empty.
constexpr std::string_view kNoValues =
    "{\"values\": [], \"shapes\": [], \"types\": [], \"strides\": []}";

constexpr uint64_t kNanosecondsPerMillisecond = 1'000'000;

}  // namespace

// A node's numbers; its name, schema and arguments are appended separately.
struct ExecutionTraceWriter::NodeFields {
  uint64_t id = 0;
  uint64_t parent_id = 0;
  uint64_t record_id = 0;  // rf_id; 0 for root nodes
  uint64_t scope = kUserScope;
  uint64_t logical_tid = 0;
  int64_t sequence_id = kUnknownSequenceId;
  uint64_t forward_tid = 0;
};

namespace {

using NodeFields = ExecutionTraceWriter::NodeFields;

uint64_t scope_of(model::RangeKind kind) {
  switch (kind) {
    case model::RangeKind::kUserAnnotation:
    case model::RangeKind::kWaitCounter: return kUserScope;
    case model::RangeKind::kBackwardNode: return kBackwardFunctionScope;
    case model::RangeKind::kOperator:
    case model::RangeKind::kBackwardEvaluate:
    case model::RangeKind::kCudaRuntime:
    case model::RangeKind::kCudaDriver:
    case model::RangeKind::kFunctionRange:
    case model::RangeKind::kCompiledKernel: break;
  }
  return kFunctionScope;
}

// Key order id, name, ctrl_deps, inputs, outputs, attrs, and the attrs in the fixed order
// of torch's writeJsonNode (formats.md §3.3), without a separator after it. `name_json` and
// `schema_json` come quoted and escaped; `append_inputs`/`append_outputs` append each object.
// The constant text between the values is written in as few pieces as it takes: millions of
// nodes a second go through here.
// `more_attrs` follows torch's attrs, each preceded by ", ".
template <typename AppendInputs, typename AppendOutputs>
void append_node(std::string& out, const NodeFields& node, std::string_view name_json, std::string_view schema_json,
                 AppendInputs append_inputs, AppendOutputs append_outputs, std::string_view more_attrs = {}) {
  out += "    {\"id\": ";
  append_json_integer(out, node.id);
  out += ", \"name\": ";
  out += name_json;
  out += ", \"ctrl_deps\": ";
  append_json_integer(out, node.parent_id);
  out += ", \"inputs\": ";
  append_inputs();
  out += ", \"outputs\": ";
  append_outputs();
  out += ", \"attrs\": [{\"name\": \"rf_id\", \"type\": \"uint64\", \"value\": ";
  append_json_integer(out, node.record_id);
  out += "}, {\"name\": \"fw_parent\", \"type\": \"uint64\", \"value\": 0}, "
         "{\"name\": \"seq_id\", \"type\": \"int64\", \"value\": ";
  append_json_integer(out, node.sequence_id);
  out += "}, {\"name\": \"scope\", \"type\": \"uint64\", \"value\": ";
  append_json_integer(out, node.scope);
  out += "}, {\"name\": \"tid\", \"type\": \"uint64\", \"value\": ";
  append_json_integer(out, node.logical_tid);
  out += "}, {\"name\": \"fw_tid\", \"type\": \"uint64\", \"value\": ";
  append_json_integer(out, node.forward_tid);
  out += "}, {\"name\": \"op_schema\", \"type\": \"string\", \"value\": ";
  out += schema_json;
  out += "}, {\"name\": \"kernel_backend\", \"type\": \"string\", \"value\": \"\"}, "
         "{\"name\": \"kernel_file\", \"type\": \"string\", \"value\": \"\"}";
  out += more_attrs;
  out += "]}";
}

// "input 2: 1024 of 1500 elements read; output 0: not read"; "" when every value was read.
std::string unread_values(const model::OpSpan& span) {
  std::string text;
  const auto describe = [&](const std::vector<model::Value>& values, std::string_view direction) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (model::is_known(values[i])) continue;
      text += text.empty() ? "" : "; ";
      text += std::string(direction) + " " + std::to_string(i) + ": " + model::unread_part(values[i]);
    }
  };
  describe(span.inputs, "input");
  describe(span.outputs, "output");
  return text;
}

// tprof's attrs of an op with a value not read in full: what was not read, and, where an input
// was not, the op's schema, moved out of op_schema. An op whose inputs are not all known cannot
// be replayed as it ran. PARAM's et_replay takes a node without op_schema for a label (as it
// takes record_function ranges): it replays the ops inside it instead, whose inputs were read,
// where an input it cannot use would stop the whole replay and a list cut short would replay
// a smaller op without a word.
std::string unread_value_attrs(const model::OpSpan& span, std::string_view schema_json, bool inputs_unread) {
  const std::string unread = unread_values(span);
  if (unread.empty()) return "";
  std::string attrs = ", {\"name\": \"tprof_unread_values\", \"type\": \"string\", \"value\": ";
  append_json_string(attrs, unread);
  attrs += '}';
  if (inputs_unread) {
    attrs += ", {\"name\": \"tprof_op_schema\", \"type\": \"string\", \"value\": ";
    attrs += schema_json;
    attrs += '}';
  }
  return attrs;
}

// A node without loggable arguments: the root nodes.
void append_root_node(std::string& out, std::string_view name, const NodeFields& node) {
  std::string name_json;
  append_json_string(name_json, name);
  const auto no_values = [&] { out += kNoValues; };
  append_node(out, node, name_json, "\"\"", no_values, no_values);
}

// torch's "time": local wall time at start, strftime("%Y-%m-%d %X").
std::string local_time_text(uint64_t unix_ns) {
  const time_t seconds = static_cast<time_t>(unix_ns / 1'000'000'000);
  struct tm local {};
  char text[64] = {};
  if (localtime_r(&seconds, &local) == nullptr) return "";
  strftime(text, sizeof text, "%Y-%m-%d %X", &local);
  return text;
}

// Node ids come from entry ids (see node_id); tensor and storage ids from their own counter,
// started far above any entry id so that, as with torch's one shared counter, no tensor id is
// also a node id.
constexpr uint64_t kFirstObjectId = uint64_t{1} << 40;

}  // namespace

ExecutionTraceWriter::ExecutionTraceWriter(OutputFile& out) : out_(out), next_object_id_(kFirstObjectId) {}

// Key order of §3.2. start_ts/finish_ts are steady-clock milliseconds in torch and nothing
// relates them to other clocks; tprof has only wall-clock times, so it writes the recording
// window in Unix milliseconds.
void ExecutionTraceWriter::begin(const model::SessionInfo& session) {
  line_.assign("{\n  \"schema\": ");
  append_json_string(line_, kExecutionTraceSchema);
  line_ += ", \"pid\": ";
  append_json_integer(line_, session.pid);
  line_ += ", \"time\": ";
  append_json_string(line_, local_time_text(session.window_start_unix_ns));
  line_ += ", \"start_ts\": ";
  append_json_integer(line_, session.window_start_unix_ns / kNanosecondsPerMillisecond);
  line_ += ",\n  \"nodes\": [\n";
  out_.write(line_);
}

void ExecutionTraceWriter::thread(const model::ThreadInfo& thread) { thread_entry_ids_[thread.tid] = thread.entry_id; }

// Written at close, as torch writes nodes at op exit (post-order); ids come from the entry
// order, so that sorted by id they follow the enter order as torch's do (PARAM cuts iterations
// by ProfilerStep node ids).
void ExecutionTraceWriter::op(const model::ClosedOp& closed) {
  // torch's ET records RecordFunctions only; CUDA calls and inductor's kernels (which run none
  // unless built to) are in the Chrome trace. Wait counters are written as the user annotations
  // the Chrome trace shows them as: every user_annotation's Record function id is an ET rf_id.
  if (closed.op.kind == model::RangeKind::kCudaRuntime || closed.op.kind == model::RangeKind::kCudaDriver ||
      closed.op.kind == model::RangeKind::kCompiledKernel)
    return;
  const model::OpSpan& span = closed.span;
  const ThreadNodes& thread = thread_nodes(closed.tid);
  const NodeFields node{.id = node_id(span.record_id),
                        .parent_id = span.parent_record_id == 0 ? thread.root_id : node_id(span.parent_record_id),
                        .record_id = span.record_id,
                        .scope = scope_of(closed.op.kind),
                        .logical_tid = thread.logical_tid,
                        .sequence_id = span.sequence_number,
                        .forward_tid = span.forward_thread};
  const OperatorText& text = operator_text(span.operator_index, closed.op);
  const bool inputs_unread =
      span.arguments_recorded && !std::all_of(span.inputs.begin(), span.inputs.end(), model::is_known);
  line_.clear();
  append_node(
      line_, node, text.name_json, inputs_unread ? "\"\"" : std::string_view(text.schema_json),
      [&] { append_arguments(span.arguments_recorded ? &span.inputs : nullptr); },
      [&] { append_arguments(span.arguments_recorded ? &span.outputs : nullptr); },
      span.arguments_recorded ? unread_value_attrs(span, text.schema_json, inputs_unread) : std::string());
  line_ += ",\n";
  out_.write(line_);
}

// An op's inputs or outputs object. The tensors' ids are looked up at every node; the rest
// repeats from call to call and is remembered.
void ExecutionTraceWriter::append_arguments(const std::vector<model::Value>* values) {
  if (values == nullptr) {
    line_ += kNoValues;
    return;
  }
  append_execution_trace_value_list(line_, *values, tensor_ids_);
  shapes_types_strides_.append(line_, *values, append_execution_trace_shapes_types_strides);
}

// An operator's name and schema as JSON strings, escaped once. Keyed by operator index; the
// table can grow and move while recording, so an entry made for another address is redone.
const ExecutionTraceWriter::OperatorText& ExecutionTraceWriter::operator_text(uint32_t index,
                                                                               const model::Operator& op) {
  if (index >= operator_texts_.size()) operator_texts_.resize(index + 1);
  OperatorText& text = operator_texts_[index];
  if (text.source != &op) {
    text.source = &op;
    text.name_json.clear();
    append_json_string(text.name_json, op.name);
    text.schema_json.clear();
    append_json_string(text.schema_json, op.schema);
  }
  return text;
}

// The thread's root node and logical id, writing the root at the thread's first node: torch
// numbers threads logically 1, 2, 3... in order of first use (formats.md §1.4). The root's id
// is the thread's entry id, which precedes every range of the thread.
const ExecutionTraceWriter::ThreadNodes& ExecutionTraceWriter::thread_nodes(uint32_t tid) {
  const auto [entry, is_new] = threads_.try_emplace(tid);
  ThreadNodes& thread = entry->second;
  if (is_new) {
    // Every sink hears of a thread before its ranges; a thread it never heard of would still get
    // a root, with an id from the object counter that no node shares.
    const auto entry_id = thread_entry_ids_.find(tid);
    thread.root_id = entry_id == thread_entry_ids_.end() ? next_object_id_++ : node_id(entry_id->second);
    thread.logical_tid = threads_.size();
    line_.clear();
    append_root_node(line_, kThreadRootName,
                     {.id = thread.root_id,
                      .parent_id = kProcessRootId,
                      .record_id = 0,
                      .scope = kUserScope,
                      .logical_tid = thread.logical_tid});
    line_ += ",\n";
    out_.write(line_);
  }
  return thread;
}

// Entry ids count from 1 and node id 1 is the process root.
uint64_t ExecutionTraceWriter::node_id(uint64_t entry_id) { return entry_id + kProcessRootId; }

void ExecutionTraceWriter::flush() { out_.flush(); }

void ExecutionTraceWriter::finish(const model::RunSummary& summary) {
  out_.write(execution_trace_tail(summary.window_end_unix_ns / kNanosecondsPerMillisecond, summary.recovered));
}

// The process root comes last and closes the list, as torch writes it at unregister; it is
// its own parent (formats.md §3.3).
std::string execution_trace_tail(uint64_t finish_ts_ms, bool recovered) {
  std::string tail;
  append_root_node(tail, kProcessRootName,
                   {.id = kProcessRootId,
                    .parent_id = kProcessRootId,
                    .record_id = 0,
                    .scope = kUserScope,
                    .logical_tid = 0});
  tail += "\n  ],\n  \"finish_ts\": ";
  append_json_integer(tail, finish_ts_ms);
  if (recovered) tail += ",\n  \"tprof_recovered\": true";
  tail += "\n}\n";
  return tail;
}

void write_execution_trace(const model::Trace& trace, OutputFile& out) {
  ExecutionTraceWriter writer(out);
  model::replay_trace(trace, writer);
}

}  // namespace tprof::exporters
