#include "userspace/ingest/record_consumer.h"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <optional>

#include "op_arguments.h"
#include "op_record.h"
#include "userspace/cli/error.h"

namespace tprof {

void RecordConsumer::RingBufferDeleter::operator()(ring_buffer* ring) const { ring_buffer__free(ring); }

namespace {

// What on_record returns to stop libbpf at the drain's bound: libbpf then stores the consumer
// position past that record (it is consumed) and returns this from ring_buffer__consume().
constexpr int kBudgetSpent = -ECANCELED;

constexpr uint32_t kRecordScopeFunction = 0;  // at::RecordScope::FUNCTION

}  // namespace

RecordConsumer::RecordConsumer(int ring_buffer_fd, RecordRouter& router) : router_(router) {
  ring_.reset(ring_buffer__new(ring_buffer_fd, &RecordConsumer::on_record, this, nullptr));
  if (!ring_) throw Error(errno_message("cannot map the BPF ring buffer", errno));
}

RecordConsumer::~RecordConsumer() = default;

bool RecordConsumer::drain(size_t max_records) {
  budget_ = max_records;
  const int result = ring_buffer__consume(ring_.get());
  if (result == kBudgetSpent) return true;
  if (result < 0 && result != -EINTR) throw Error(errno_message("reading the BPF ring buffer failed", -result));
  return false;
}

int RecordConsumer::on_record(void* consumer, void* data, size_t size) {
  auto& self = *static_cast<RecordConsumer*>(consumer);
  self.router_.route_record({static_cast<const std::byte*>(data), size});
  return --self.budget_ == 0 ? kBudgetSpent : 0;
}

void RecordRouter::route_record(std::span<const std::byte> record) {
  if (record.size() < sizeof(op_record)) {
    ++unrouted_;
    return;
  }
  op_record head;
  std::memcpy(&head, record.data(), sizeof(head));
  const auto decoder = decoders_.find(head.tgid);
  if (decoder == decoders_.end()) {
    ++unrouted_;
    return;
  }
  last_timestamp_ns_ = head.timestamp_ns;
  decoder->second->decode(record);
}

void RecordDecoder::decode(std::span<const std::byte> record) {
  if (record.size() < sizeof(op_record)) {
    ++malformed_;
    return;
  }
  op_record head;
  std::memcpy(&head, record.data(), sizeof(head));
  if (head.abi_version != OP_RECORD_ABI_VERSION) {
    ++malformed_;
    return;
  }
  ++records_;
  consume(head, reinterpret_cast<const unsigned char*>(record.data()) + sizeof(head), record.size() - sizeof(head));
}

namespace {

// A payload struct copied out of the ring buffer, or nullopt if the record is too short.
template <typename Payload>
std::optional<Payload> payload_as(const unsigned char* payload, size_t size) {
  if (size < sizeof(Payload)) return std::nullopt;
  Payload value;
  std::memcpy(&value, payload, sizeof(value));
  return value;
}

int64_t signed_sequence_number(uint64_t raw) {
  // Nodes without a forward op (AccumulateGrad) carry UINT64_MAX; torch shows -1.
  return raw > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(raw);
}

}  // namespace

std::vector<model::Value> RecordDecoder::decode_arguments(uint32_t op_id, bool returns, const unsigned char* payload,
                                                          size_t size) {
  if (!copy_arguments(payload, size)) return {};
  return callbacks_.decode_arguments(op_id, returns, arguments_);
}

bool RecordDecoder::copy_arguments(const unsigned char* payload, size_t size) {
  // BPF cuts the record after its last tensor copy (the tensor copies it holds are checked
  // below) unless it holds out-of-line dims; anything shorter than the part before them reads
  // as zeros. Only what the record holds is copied: the whole struct is 3 KB, and this runs for
  // every op entry and exit.
  constexpr size_t kHeaderBytes = offsetof(op_arguments, tensors);
  const size_t copied = std::min(size, sizeof(arguments_));
  std::memcpy(&arguments_, payload, copied);
  if (copied < kHeaderBytes) std::memset(reinterpret_cast<unsigned char*>(&arguments_) + copied, 0, kHeaderBytes - copied);
  if (arguments_.tensor_count > OP_TENSORS_MAX || size < kHeaderBytes + arguments_.tensor_count * sizeof(tensor_copy)) {
    ++malformed_;
    return false;
  }
  // Out-of-line dims come only with the whole struct.
  if (copied < sizeof(arguments_)) arguments_.out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
  return true;
}

// The arguments past the first OP_ARGUMENTS_MAX of the op whose entry its thread sent just before.
void RecordDecoder::consume_more_arguments(const op_record& head, const unsigned char* payload, size_t payload_size) {
  if (!copy_arguments(payload, payload_size) || !callbacks_.complete_more_arguments) return;
  const bool completed = spans_.complete_newest_entry(head.tid, head.op_id, [&](std::vector<model::Value>& inputs) {
    callbacks_.complete_more_arguments(head.op_id, arguments_, inputs);
  });
  if (!completed) ++unmatched_more_arguments_;
}

void RecordDecoder::consume_device_activity(const unsigned char* payload, size_t payload_size) {
  const auto activity = payload_as<device_activity>(payload, payload_size);
  if (!activity) {
    ++malformed_;
    return;
  }
  if (callbacks_.on_device_activity) callbacks_.on_device_activity(*activity);
}

// A new stack: its depth and truncation flag, then `depth` frames (BPF sends no more).
void RecordDecoder::consume_python_stack(uint64_t stack_id, const unsigned char* payload, size_t payload_size) {
  constexpr size_t kHeaderBytes = offsetof(python_stack, frames);
  if (payload_size < kHeaderBytes) {
    ++malformed_;
    return;
  }
  std::memcpy(&stack_, payload, std::min(payload_size, sizeof(stack_)));
  if (stack_.depth > PYTHON_STACK_MAX_FRAMES || payload_size < kHeaderBytes + stack_.depth * sizeof(python_frame)) {
    ++malformed_;
    return;
  }
  if (callbacks_.on_python_stack) callbacks_.on_python_stack(stack_id, stack_);
}

// Arguments an op's spill probe read a few instructions after its entry probe, on the same
// thread: they belong to that thread's newest record, its entry.
void RecordDecoder::consume_spilled_arguments(const op_record& head, const unsigned char* payload,
                                              size_t payload_size) {
  const auto spilled = payload_as<spilled_arguments>(payload, payload_size);
  if (!spilled) {
    ++malformed_;
    return;
  }
  if (!callbacks_.complete_arguments) return;
  const bool completed = spans_.complete_newest_entry(head.tid, head.op_id, [&](std::vector<model::Value>& inputs) {
    callbacks_.complete_arguments(head.op_id, *spilled, inputs);
  });
  if (!completed) ++unmatched_spilled_arguments_;
}

// More elements of a list of the thread's last record (its entry or its exit), sent right after it.
void RecordDecoder::consume_list_elements(const op_record& head, const unsigned char* payload, size_t payload_size) {
  constexpr size_t kHeaderBytes = offsetof(list_elements, ints);
  if (payload_size < kHeaderBytes) {
    ++malformed_;
    return;
  }
  std::memcpy(&elements_, payload, std::min(payload_size, sizeof(elements_)));
  size_t element_bytes = sizeof(tensor_copy);
  size_t capacity = LIST_CHUNK_TENSORS;
  if (elements_.kind != LIST_OF_TENSORS) {
    const size_t words = elements_.kind == LIST_OF_SCALARS ? SCALAR_WORDS : 1;
    element_bytes = words * sizeof(int64_t);
    capacity = LIST_CHUNK_INTS / words;
  }
  const bool known_kind =
      elements_.kind == LIST_OF_TENSORS || elements_.kind == LIST_OF_INTS || elements_.kind == LIST_OF_SCALARS;
  if (!known_kind || elements_.count > capacity || payload_size < kHeaderBytes + elements_.count * element_bytes) {
    ++malformed_;
    return;
  }
  if (!callbacks_.append_list_elements) return;
  bool appended = false;
  spans_.complete_newest_record(head.tid, head.op_id, [&](std::vector<model::Value>& values, bool) {
    appended = callbacks_.append_list_elements(elements_, values);
  });
  if (!appended) ++unmatched_list_elements_;
}

bool RecordDecoder::consume_boxed_op_entry(const op_record& head, OpEvent& event, const unsigned char* payload,
                                           size_t payload_size) {
  const auto boxed = payload_as<boxed_operator>(payload, payload_size);
  if (!boxed) return false;
  const std::string_view name(boxed->name, std::min<size_t>(boxed->name_length, strnlen(boxed->name, sizeof(boxed->name))));
  std::optional<std::string_view> overload;
  if (boxed->candidates == 1)
    overload = std::string_view(boxed->overload,
                                std::min<size_t>(boxed->overload_length, strnlen(boxed->overload, sizeof(boxed->overload))));
  const std::optional<uint32_t> op_id = callbacks_.boxed_operator(name, overload);
  open_boxed_ops_[head.tid].push_back(op_id.value_or(kUnrecordedBoxedOp));
  if (!op_id) return true;
  event.op_id = *op_id;
  spans_.add(head.tid, std::move(event));
  return true;
}

void RecordDecoder::consume_recompile_reason(const unsigned char* payload, size_t payload_size) {
  const auto reason = payload_as<recompile_reason>(payload, payload_size);
  if (!reason) {
    ++malformed_;
    return;
  }
  // Its exit comes next on its thread: more than a few waiting means their exits were lost.
  constexpr size_t kMaxWaiting = 64;
  if (recompile_reasons_.size() >= kMaxWaiting) recompile_reasons_.clear();
  const size_t length = std::min<size_t>(reason->length, sizeof(reason->text) - 1);
  recompile_reasons_[reason->handle] = std::string(reason->text, length);
}

void RecordDecoder::consume(const op_record& head, const unsigned char* payload, size_t payload_size) {
  // GPU activity comes from the CUPTI library's thread, which is no thread of the trace.
  if (head.kind == OP_RECORD_DEVICE_ACTIVITY) {
    consume_device_activity(payload, payload_size);
    return;
  }
  // A stack is no event of its thread: only its contents matter.
  if (head.kind == OP_RECORD_PYTHON_STACK) {
    consume_python_stack(head.python_stack_id, payload, payload_size);
    return;
  }
  if (head.kind == OP_RECORD_SPILLED_ARGUMENTS) {
    consume_spilled_arguments(head, payload, payload_size);
    return;
  }
  if (head.kind == OP_RECORD_LIST_ELEMENTS) {
    consume_list_elements(head, payload, payload_size);
    return;
  }
  if (head.kind == OP_RECORD_MORE_ARGUMENTS) {
    consume_more_arguments(head, payload, payload_size);
    return;
  }
  if (head.kind == OP_RECORD_RECOMPILE_REASON) {
    consume_recompile_reason(payload, payload_size);
    return;
  }
  if (seen_threads_.insert(head.tid).second) callbacks_.on_new_thread(head.tid);
  if (head.python_stack_id != 0) callbacks_.on_stack_id(head.python_stack_id);
  OpEvent event;
  event.monotonic_ns = head.timestamp_ns;
  event.op_id = head.op_id;
  event.python_stack_id = head.python_stack_id;
  event.sequence_counter = head.sequence_counter;
  event.exit_cause = head.exit_cause;
  switch (head.kind) {
    case OP_RECORD_ENTER:
    case OP_RECORD_EXIT:
      // An op id past the probe plan's table would throw where the range closes, ending tprof.
      if (!spans_.knows_operator(head.op_id)) break;
      event.is_exit = head.kind == OP_RECORD_EXIT;
      if (payload_size > 0) {
        event.arguments = decode_arguments(head.op_id, event.is_exit, payload, payload_size);
        event.has_arguments = true;
      }
      spans_.add(head.tid, std::move(event));
      return;
    case OP_RECORD_MEMORY: {
      const auto block = payload_as<memory_event>(payload, payload_size);
      if (!block) break;
      event.op_id = 0;
      event.is_memory = true;
      event.memory_address = block->address;
      event.memory_bytes = block->bytes;
      event.memory_total_allocated = block->total_allocated;
      event.memory_total_reserved = block->total_reserved;
      event.memory_device_type = block->device_type;
      event.memory_device_index = block->device_index;
      spans_.add(head.tid, std::move(event));
      return;
    }
    case OP_RECORD_PYTHON_SAMPLE:
      event.is_sample = true;
      event.blocked = head.exit_cause == SAMPLE_BLOCKED;
      ++python_samples_;
      spans_.add(head.tid, std::move(event));
      return;
    case OP_RECORD_ANNOTATION_ENTER: {
      const auto enter = payload_as<annotation_enter>(payload, payload_size);
      if (!enter) break;
      const size_t length = std::min<size_t>(enter->name_length, strnlen(enter->name, sizeof(enter->name)));
      // RecordScope::FUNCTION: dynamo's ranges (bpf/annotation_probes.bpf.h); a wait counter's;
      // else record_function().
      const auto kind = enter->scope == kRecordScopeFunction            ? model::RangeKind::kFunctionRange
                        : enter->scope == ANNOTATION_SCOPE_WAIT_COUNTER ? model::RangeKind::kWaitCounter
                                                                        : model::RangeKind::kUserAnnotation;
      event.op_id = callbacks_.annotation_operator(std::string_view(enter->name, length), kind);
      event.optimizer_steps = enter->optimizer_steps;
      open_annotations_[enter->handle] = event.op_id;
      spans_.add(head.tid, std::move(event));
      return;
    }
    case OP_RECORD_ANNOTATION_EXIT: {
      const auto exit = payload_as<annotation_exit>(payload, payload_size);
      if (!exit) break;
      const auto open = open_annotations_.find(exit->handle);
      if (open == open_annotations_.end()) return;  // its entry was lost
      event.op_id = open->second;
      event.is_exit = true;
      open_annotations_.erase(open);
      // A compile's wait counter: why it compiled again, as the range's one output.
      if (const auto reason = recompile_reasons_.find(exit->handle); reason != recompile_reasons_.end()) {
        model::Value text;
        text.kind = model::ValueKind::kString;
        text.text = std::move(reason->second);
        event.arguments.push_back(std::move(text));
        event.has_arguments = true;
        recompile_reasons_.erase(reason);
      }
      spans_.add(head.tid, std::move(event));
      return;
    }
    case OP_RECORD_BOXED_OP_ENTER:
      if (!callbacks_.boxed_operator) return;
      if (!consume_boxed_op_entry(head, event, payload, payload_size)) break;
      return;
    case OP_RECORD_BOXED_OP_EXIT: {
      auto& open = open_boxed_ops_[head.tid];
      if (open.empty()) return;  // entered before attach, or ignored
      event.op_id = open.back();
      event.is_exit = true;
      open.pop_back();
      if (event.op_id != kUnrecordedBoxedOp) spans_.add(head.tid, std::move(event));
      return;
    }
    case OP_RECORD_EVALUATE_ENTER:
    case OP_RECORD_NODE_ENTER: {
      const auto node = payload_as<autograd_node>(payload, payload_size);
      if (!node) break;
      const bool is_node = head.kind == OP_RECORD_NODE_ENTER;
      if (node_vtables_.size() < kMaxNodeVtablesKept) node_vtables_.insert(node->vptr);
      event.op_id = callbacks_.node_operator(
          node->vptr, is_node ? model::RangeKind::kBackwardNode : model::RangeKind::kBackwardEvaluate);
      // torch gives both ranges the node's sequence number and forward thread.
      event.sequence_number = signed_sequence_number(node->sequence_nr);
      event.forward_thread = node->thread_id;
      if (is_node && payload_size > sizeof(autograd_node)) {
        event.arguments = decode_arguments(kAutogradNodeInputs, false, payload + sizeof(autograd_node),
                                           payload_size - sizeof(autograd_node));
        event.has_arguments = true;
      }
      (is_node ? open_nodes_ : open_evaluations_)[head.tid].push_back(event.op_id);
      spans_.add(head.tid, std::move(event));
      return;
    }
    case OP_RECORD_EVALUATE_EXIT:
    case OP_RECORD_NODE_EXIT: {
      auto& open = (head.kind == OP_RECORD_NODE_EXIT ? open_nodes_ : open_evaluations_)[head.tid];
      if (open.empty()) return;  // entered before attach
      event.op_id = open.back();
      event.is_exit = true;
      open.pop_back();
      spans_.add(head.tid, std::move(event));
      return;
    }
  }
  ++malformed_;
}

}  // namespace tprof
