#include "userspace/record_consumer.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "op_record.h"
#include "userspace/error.h"

namespace tprof {

void RecordConsumer::RingBufferDeleter::operator()(ring_buffer* ring) const { ring_buffer__free(ring); }

RecordConsumer::RecordConsumer(int ring_buffer_fd, SpanBuilder& spans, std::function<void(uint32_t)> on_new_thread)
    : spans_(spans), on_new_thread_(std::move(on_new_thread)) {
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
  if (consumer->seen_threads_.insert(record.tid).second) consumer->on_new_thread_(record.tid);
  consumer->spans_.add(record.tid, OpEvent{record.timestamp_ns, record.op_id, record.kind == OP_RECORD_EXIT});
  return 0;
}

}  // namespace tprof
