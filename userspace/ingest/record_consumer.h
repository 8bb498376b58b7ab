// The op tracer's records, decoded: op, annotation and autograd entries and exits and stack
// samples, into a SpanCloser. RecordDecoder takes one record's bytes (pure, so that tests can
// feed it); RecordRouter hands each record to the decoder of the process it is of, since one
// ring buffer serves every target of a session; RecordConsumer drains the ring buffer into the
// router. The BPF side never wakes us (BPF_RB_NO_WAKEUP), so drain() is called on a timer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "device_activity.h"
#include "model/trace_model.h"
#include "op_arguments.h"
#include "python_stack.h"
#include "userspace/assemble/span_closer.h"

struct ring_buffer;
struct op_record;

namespace tprof {

class RecordDecoder {
 public:
  // The op id decode_arguments receives for an autograd node's inputs: every one a Tensor.
  static constexpr uint32_t kAutogradNodeInputs = UINT32_MAX;

  struct Callbacks {
    // The first time a thread id is seen, while the thread most likely still exists (so
    // that its name can be read).
    std::function<void(uint32_t tid)> on_new_thread;
    // Every Python stack id a record carries, so that its stack is copied while it is
    // still in the BPF map.
    std::function<void(uint64_t stack_id)> on_stack_id;
    // Decodes what BPF appended to a record: op `op_id`'s inputs, or its returns.
    std::function<std::vector<model::Value>(uint32_t op_id, bool returns, const op_arguments& arguments)>
        decode_arguments;
    // The operator index of a record_function range with this name.
    std::function<uint32_t(std::string_view name, model::RangeKind kind)> annotation_operator;
    // The operator index of an op called through the boxed dispatcher, by its name and overload
    // (none: not known, an overload packet's call); none for an op torch does not record. Empty:
    // such records are ignored.
    std::function<std::optional<uint32_t>(std::string_view name, std::optional<std::string_view> overload)>
        boxed_operator;
    // The operator index of an autograd node's range (evaluate_function or the node itself),
    // from the node's vtable pointer.
    std::function<uint32_t(uint64_t vptr, model::RangeKind kind)> node_operator;
    // A GPU activity record from the CUPTI library; empty: they are not expected, and ignored.
    std::function<void(const device_activity& activity)> on_device_activity;
    // A stack the walker stored for the first time, sent ahead of the records that name it
    // (frames past its depth are stale); empty: ignored.
    std::function<void(uint64_t stack_id, const python_stack& stack)> on_python_stack;
    // Fills in op `op_id`'s decoded inputs with what its spill probe read; empty: ignored.
    std::function<void(uint32_t op_id, const spilled_arguments& spilled, std::vector<model::Value>& inputs)>
        complete_arguments;
    // Appends the elements of a list argument (or return) that did not fit in its op's record
    // to `values`, that record's decoded inputs or returns; false when they do not continue a
    // list there. Empty: ignored.
    std::function<bool(const list_elements& elements, std::vector<model::Value>& values)> append_list_elements;
    // Fills in op `op_id`'s decoded inputs from OP_ARGUMENTS_MAX on with the arguments of its
    // OP_RECORD_MORE_ARGUMENTS record; empty: ignored.
    std::function<void(uint32_t op_id, const op_arguments& arguments, std::vector<model::Value>& inputs)>
        complete_more_arguments;
  };
  RecordDecoder(SpanCloser& spans, Callbacks callbacks) : spans_(spans), callbacks_(std::move(callbacks)) {}

  // One record as the ring buffer holds it: a struct op_record head, then its kind's payload.
  // One that is too short, of another ABI version, of an unknown kind or of an op id past the
  // operator table is counted malformed.
  void decode(std::span<const std::byte> record);

  uint64_t records() const { return records_; }
  uint64_t python_samples() const { return python_samples_; }

  // The vtables (runtime vptrs) of the autograd nodes the target was seen to run, from
  // evaluate_function's records too: --max-overhead's windows probe only their classes' apply().
  static constexpr size_t kMaxNodeVtablesKept = 1 << 16;
  const std::unordered_set<uint64_t>& node_vtables() const { return node_vtables_; }
  uint64_t malformed_records() const { return malformed_; }
  // Spill-probe records whose op entry was not the thread's last record (attached between
  // the two probes, or the entry record was lost).
  uint64_t unmatched_spilled_arguments() const { return unmatched_spilled_arguments_; }
  // More-arguments records whose op entry was not the thread's last record.
  uint64_t unmatched_more_arguments() const { return unmatched_more_arguments_; }
  // List-element records that continued no list of their thread's last record (it was lost,
  // or an element before them could not be read).
  uint64_t unmatched_list_elements() const { return unmatched_list_elements_; }

 private:
  void consume(const op_record& head, const unsigned char* payload, size_t payload_size);
  void consume_device_activity(const unsigned char* payload, size_t payload_size);
  void consume_python_stack(uint64_t stack_id, const unsigned char* payload, size_t payload_size);
  void consume_spilled_arguments(const op_record& head, const unsigned char* payload, size_t payload_size);
  void consume_list_elements(const op_record& head, const unsigned char* payload, size_t payload_size);
  void consume_more_arguments(const op_record& head, const unsigned char* payload, size_t payload_size);
  void consume_recompile_reason(const unsigned char* payload, size_t payload_size);
  // A boxed op's entry; false when its payload is malformed.
  bool consume_boxed_op_entry(const op_record& head, OpEvent& event, const unsigned char* payload, size_t payload_size);
  // Copies a payload of op_arguments into arguments_; false (counted malformed) if cut short.
  bool copy_arguments(const unsigned char* payload, size_t size);
  // The op arguments in a payload of `size` bytes; none (and counted malformed) if it is cut short.
  std::vector<model::Value> decode_arguments(uint32_t op_id, bool returns, const unsigned char* payload,
                                             size_t size);

  SpanCloser& spans_;
  Callbacks callbacks_;
  op_arguments arguments_;  // the record being decoded, copied out of the ring buffer
  python_stack stack_;      // likewise, for a stack record
  std::unordered_set<uint32_t> seen_threads_;
  std::unordered_set<uint64_t> node_vtables_;
  // Annotation handle (its RecordFunction's address) -> operator index, while open.
  std::unordered_map<uint64_t, uint32_t> open_annotations_;
  // Wait counter handle -> the recompile reason sent just before its exit (bpf/op_record.h).
  std::unordered_map<uint64_t, std::string> recompile_reasons_;
  // Per thread: the operator indices of the evaluate_function and node ranges open there.
  std::unordered_map<uint32_t, std::vector<uint32_t>> open_evaluations_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> open_nodes_;
  // Per thread: the operator indices of the boxed ops open there, kUnrecordedBoxedOp for one
  // that is no range (its exit is dropped too).
  std::unordered_map<uint32_t, std::vector<uint32_t>> open_boxed_ops_;
  static constexpr uint32_t kUnrecordedBoxedOp = UINT32_MAX;
  uint64_t records_ = 0;
  uint64_t python_samples_ = 0;
  uint64_t malformed_ = 0;
  uint64_t unmatched_spilled_arguments_ = 0;
  uint64_t unmatched_list_elements_ = 0;
  uint64_t unmatched_more_arguments_ = 0;
  list_elements elements_;  // a list-elements record, copied out of the ring buffer
};

class RecordRouter {
 public:
  // Records of process `tgid` (as the op tracer numbers it) go to `decoder` from now on.
  void route(uint32_t tgid, RecordDecoder& decoder) { decoders_[tgid] = &decoder; }
  // ... and to no one: a target finished with (unless the pid was reused by a later target).
  void forget(uint32_t tgid, const RecordDecoder& decoder) {
    if (const auto routed = decoders_.find(tgid); routed != decoders_.end() && routed->second == &decoder)
      decoders_.erase(routed);
  }

  // One record as the ring buffer holds it, to its process's decoder. One too short to name
  // a process, or of a process no target is, is counted unrouted.
  void route_record(std::span<const std::byte> record);

  // The timestamp of the last record routed; 0 before the first.
  uint64_t last_timestamp_ns() const { return last_timestamp_ns_; }
  uint64_t unrouted() const { return unrouted_; }

 private:
  std::unordered_map<uint32_t, RecordDecoder*> decoders_;
  uint64_t last_timestamp_ns_ = 0;
  uint64_t unrouted_ = 0;
};

class RecordConsumer {
 public:
  // Maps the ring buffer behind `ring_buffer_fd`; throws tprof::Error.
  RecordConsumer(int ring_buffer_fd, RecordRouter& router);
  ~RecordConsumer();
  RecordConsumer(const RecordConsumer&) = delete;
  RecordConsumer& operator=(const RecordConsumer&) = delete;

  // Decodes what is available now, at most `max_records` of it, so that what waits to be
  // closed stays bounded however far behind tprof has fallen. Returns whether it stopped at
  // that bound (more may be waiting). Throws tprof::Error on a ring-buffer failure.
  bool drain(size_t max_records);

 private:
  static int on_record(void* consumer, void* data, size_t size);

  struct RingBufferDeleter {
    void operator()(ring_buffer* ring) const;
  };
  RecordRouter& router_;
  size_t budget_ = 0;  // records left in this drain
  std::unique_ptr<ring_buffer, RingBufferDeleter> ring_;
};

}  // namespace tprof
