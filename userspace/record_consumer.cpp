#include "userspace/record_consumer.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "op_record.h"
#include "userspace/error.h"

namespace tprof {

void RecordConsumer::RingBufferDeleter::operator()(ring_buffer* ring) const { ring_buffer__free(ring); }

RecordConsumer::RecordConsumer(int ring_buffer_fd, SpanBuilder& spans, PythonSampleLog& samples, Callbacks callbacks)
    : spans_(spans), samples_(samples), callbacks_(std::move(callbacks)) {
  ring_.reset(ring_buffer__new(ring_buffer_fd, &RecordConsumer::on_record, this, nullptr));
  if (!ring_) throw Error(errno_message("cannot map the BPF ring buffer", errno));
}

RecordConsumer::~RecordConsumer() = default;

void RecordConsumer::drain() {
  const int result = ring_buffer__consume(ring_.get());
  if (result < 0 && result != -EINTR) throw Error(errno_message("reading the BPF ring buffer failed", -result));
}

int RecordConsumer::on_record(void* self, void* data, size_t size) {
  auto* consumer = static_cast<RecordConsumer*>(self);
  if (size < sizeof(op_record)) {
    ++consumer->malformed_;
    return 0;
  }
  op_record record;
  std::memcpy(&record, data, sizeof(record));
  ++consumer->records_;
  if (consumer->seen_threads_.insert(record.tid).second) consumer->callbacks_.on_new_thread(record.tid);
  if (record.python_stack_id != 0) consumer->callbacks_.on_stack_id(record.python_stack_id);
  switch (record.kind) {
    case OP_RECORD_ENTER:
    case OP_RECORD_EXIT:
      consumer->spans_.add(record.tid, OpEvent{record.timestamp_ns, record.op_id, record.kind == OP_RECORD_EXIT,
                                               record.python_stack_id});
      break;
    case OP_RECORD_PYTHON_SAMPLE:
      consumer->samples_.add(record.tid, PythonSample{record.timestamp_ns, record.python_stack_id});
      break;
    default:
      ++consumer->malformed_;
  }
  return 0;
}

}  // namespace tprof
