#include "exporters/execution_trace_writer.h"

#include <time.h>

#include <cstdint>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exporters/execution_trace_values.h"
#include "exporters/json_writer.h"
#include "exporters/start_order.h"

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

// What one node carries beyond the fixed empty inputs/outputs.
struct NodeFields {
  uint64_t id = 0;
  std::string_view name;
  uint64_t parent_id = 0;
  uint64_t record_id = 0;  // rf_id; 0 for root nodes
  uint64_t scope = kUserScope;
  uint64_t logical_tid = 0;
  std::string_view op_schema;  // "" for annotations, root nodes and ops without a known schema
  const std::vector<model::Value>* inputs = nullptr;   // null: none recorded
  const std::vector<model::Value>* outputs = nullptr;
  int64_t sequence_id = kUnknownSequenceId;
  uint64_t forward_tid = 0;
};

uint64_t scope_of(model::RangeKind kind) {
  switch (kind) {
    case model::RangeKind::kUserAnnotation: return kUserScope;
    case model::RangeKind::kBackwardNode: return kBackwardFunctionScope;
    case model::RangeKind::kOperator:
    case model::RangeKind::kBackwardEvaluate: break;
  }
  return kFunctionScope;
}

// A node whose interval may still enclose later nodes on its thread.
struct OpenNode {
  uint64_t id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool is_op = false;
};

struct ThreadState {
  uint64_t root_id = 0;
  uint64_t logical_tid = 0;
  std::vector<OpenNode> open;  // the enclosing chain, outermost first
  uint32_t open_ops = 0;       // how many entries of `open` are ops
};

// One already-sorted source of nodes: all annotations, or one thread's op spans.
struct NodeStream {
  const model::ThreadTrack* thread = nullptr;  // null for the annotation stream
  size_t next = 0;
  size_t position = 0;  // tie-break among streams: annotations first, then threads in order
};

bool encloses(const OpenNode& outer, uint64_t start_ns, uint64_t end_ns) {
  return outer.start_ns <= start_ns && end_ns <= outer.end_ns;
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

class ExecutionTraceEmitter {
 public:
  ExecutionTraceEmitter(const model::Trace& trace, OutputFile& out) : trace_(trace), out_(out) {}

  void write() {
    write_header();
    write_nodes_in_enter_order();
    write_footer();
  }

 private:
  // Key order of §3.2. start_ts/finish_ts are steady-clock milliseconds in torch and nothing
  // relates them to other clocks; tprof has only wall-clock times, so it writes the recording
  // window in Unix milliseconds.
  void write_header() {
    const model::TraceMetadata& metadata = trace_.metadata;
    line_.assign("{\n  \"schema\": ");
    append_json_string(line_, kExecutionTraceSchema);
    line_ += ", \"pid\": ";
    append_json_integer(line_, metadata.pid);
    line_ += ", \"time\": ";
    append_json_string(line_, local_time_text(metadata.window_start_unix_ns));
    line_ += ", \"start_ts\": ";
    append_json_integer(line_, metadata.window_start_unix_ns / kNanosecondsPerMillisecond);
    line_ += ",\n  \"nodes\": [\n";
    out_.write(line_);
  }

  // A k-way merge of the sorted streams, so that ids follow the global enter order as torch's
  // do (PARAM cuts iterations by ProfilerStep node ids) while memory stays O(threads).
  void write_nodes_in_enter_order() {
    std::vector<NodeStream> streams;
    streams.reserve(trace_.threads.size() + 1);
    streams.push_back({.thread = nullptr, .next = 0, .position = 0});
    for (const model::ThreadTrack& thread : trace_.threads)
      streams.push_back({.thread = &thread, .next = 0, .position = streams.size()});

    using QueueEntry = std::pair<StartOrderKey, NodeStream*>;
    auto enters_later = [](const QueueEntry& a, const QueueEntry& b) { return a.first > b.first; };
    std::priority_queue<QueueEntry, std::vector<QueueEntry>, decltype(enters_later)> queue(
        enters_later);
    auto enqueue_next = [&](NodeStream& stream) {
      if (stream.thread == nullptr) {
        if (stream.next < trace_.annotations.size()) {
          const model::Annotation& annotation = trace_.annotations[stream.next];
          queue.push({{annotation.start_ns, annotation.end_ns, stream.position}, &stream});
        }
      } else if (stream.next < stream.thread->spans.size()) {
        const model::OpSpan& span = stream.thread->spans[stream.next];
        queue.push({{span.start_ns, span.end_ns, stream.position}, &stream});
      }
    };
    for (NodeStream& stream : streams) enqueue_next(stream);

    while (!queue.empty()) {
      NodeStream& stream = *queue.top().second;
      queue.pop();
      if (stream.thread == nullptr) {
        write_annotation(trace_.annotations[stream.next]);
      } else {
        write_op(stream.thread->tid, stream.thread->spans[stream.next]);
      }
      ++stream.next;
      enqueue_next(stream);
    }
  }

  void write_op(uint32_t tid, const model::OpSpan& span) {
    ThreadState& thread = thread_state(tid);
    // Ops nest by depth, which the span builder derived from the call stack itself; an
    // annotation between them stays a parent only while its interval covers the op.
    while (!thread.open.empty()) {
      const OpenNode& top = thread.open.back();
      const bool is_parent = top.is_op ? thread.open_ops <= span.depth
                                       : encloses(top, span.start_ns, span.end_ns);
      if (is_parent) break;
      pop_open(thread);
    }
    const model::Operator& op = trace_.operators.at(span.operator_index);
    const uint64_t id = next_id_++;
    write_node({.id = id,
                .name = op.name,
                .parent_id = parent_of(thread),
                .record_id = span.record_id,
                .scope = scope_of(op.kind),
                .logical_tid = thread.logical_tid,
                .op_schema = op.schema,
                .inputs = span.arguments_recorded ? &span.inputs : nullptr,
                .outputs = span.arguments_recorded ? &span.outputs : nullptr,
                .sequence_id = span.sequence_number,
                .forward_tid = span.forward_thread});
    thread.open.push_back({id, span.start_ns, span.end_ns, true});
    ++thread.open_ops;
  }

  void write_annotation(const model::Annotation& annotation) {
    ThreadState& thread = thread_state(annotation.tid);
    while (!thread.open.empty() &&
           !encloses(thread.open.back(), annotation.start_ns, annotation.end_ns))
      pop_open(thread);
    const uint64_t id = next_id_++;
    write_node({.id = id,
                .name = annotation.name,
                .parent_id = parent_of(thread),
                .record_id = annotation.record_id,
                .scope = kUserScope,
                .logical_tid = thread.logical_tid,
                .op_schema = ""});
    thread.open.push_back({id, annotation.start_ns, annotation.end_ns, false});
  }

  static uint64_t parent_of(const ThreadState& thread) {
    return thread.open.empty() ? thread.root_id : thread.open.back().id;
  }

  static void pop_open(ThreadState& thread) {
    if (thread.open.back().is_op) --thread.open_ops;
    thread.open.pop_back();
  }

  // The thread's state, writing its root node on first use: torch numbers threads logically
  // 1, 2, 3... in order of first use (formats.md §1.4) and writes the root before the first op.
  ThreadState& thread_state(uint32_t tid) {
    const auto [entry, is_new] = threads_.try_emplace(tid);
    ThreadState& thread = entry->second;
    if (is_new) {
      thread.root_id = next_id_++;
      thread.logical_tid = threads_.size();
      write_node({.id = thread.root_id,
                  .name = kThreadRootName,
                  .parent_id = kProcessRootId,
                  .record_id = 0,
                  .scope = kUserScope,
                  .logical_tid = thread.logical_tid,
                  .op_schema = ""});
    }
    return thread;
  }

  // Key order id, name, ctrl_deps, inputs, outputs, attrs, and the attrs in the fixed order
  // of torch's writeJsonNode (formats.md §3.3). Leaves the line without its separator.
  void format_node(const NodeFields& node) {
    line_.assign("    {\"id\": ");
    append_json_integer(line_, node.id);
    line_ += ", \"name\": ";
    append_json_string(line_, node.name);
    line_ += ", \"ctrl_deps\": ";
    append_json_integer(line_, node.parent_id);
    line_ += ", \"inputs\": ";
    append_values(node.inputs);
    line_ += ", \"outputs\": ";
    append_values(node.outputs);
    line_ += ", \"attrs\": [";
    append_integer_attr("rf_id", "uint64", node.record_id);
    line_ += ", ";
    append_integer_attr("fw_parent", "uint64", 0);
    line_ += ", ";
    append_integer_attr("seq_id", "int64", node.sequence_id);
    line_ += ", ";
    append_integer_attr("scope", "uint64", node.scope);
    line_ += ", ";
    append_integer_attr("tid", "uint64", node.logical_tid);
    line_ += ", ";
    append_integer_attr("fw_tid", "uint64", node.forward_tid);
    line_ += ", ";
    append_string_attr("op_schema", node.op_schema);
    line_ += ", ";
    append_string_attr("kernel_backend", "");
    line_ += ", ";
    append_string_attr("kernel_file", "");
    line_ += "]}";
  }

  void append_values(const std::vector<model::Value>* values) {
    if (values == nullptr) {
      line_ += kNoValues;
    } else {
      append_execution_trace_values(line_, *values, tensor_ids_);
    }
  }

  void write_node(const NodeFields& node) {
    format_node(node);
    line_ += ",\n";
    out_.write(line_);
  }

  template <typename Integer>
  void append_integer_attr(std::string_view name, std::string_view type, Integer value) {
    append_attr_head(name, type);
    append_json_integer(line_, value);
    line_ += '}';
  }

  void append_string_attr(std::string_view name, std::string_view value) {
    append_attr_head(name, "string");
    append_json_string(line_, value);
    line_ += '}';
  }

  void append_attr_head(std::string_view name, std::string_view type) {
    line_ += "{\"name\": \"";
    line_ += name;
    line_ += "\", \"type\": \"";
    line_ += type;
    line_ += "\", \"value\": ";
  }

  // The process root comes last and closes the list, as torch writes it at unregister; it
  // is its own parent (formats.md §3.3).
  void write_footer() {
    format_node({.id = kProcessRootId,
                 .name = kProcessRootName,
                 .parent_id = kProcessRootId,
                 .record_id = 0,
                 .scope = kUserScope,
                 .logical_tid = 0,
                 .op_schema = ""});
    line_ += "\n  ],\n  \"finish_ts\": ";
    append_json_integer(line_, trace_.metadata.window_end_unix_ns / kNanosecondsPerMillisecond);
    line_ += "\n}\n";
    out_.write(line_);
  }

  const model::Trace& trace_;
  OutputFile& out_;
  std::unordered_map<uint32_t, ThreadState> threads_;  // by OS tid
  uint64_t next_id_ = kProcessRootId + 1;
  TensorIds tensor_ids_{next_id_};  // tensors and storages share the node id counter
  std::string line_;  // one node at a time, reused so that writing allocates nothing per node
};

}  // namespace

void write_execution_trace(const model::Trace& trace, OutputFile& out) {
  ExecutionTraceEmitter(trace, out).write();
}

}  // namespace tprof::exporters
