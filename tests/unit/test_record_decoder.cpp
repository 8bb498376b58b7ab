// The record decoder, fed bytes laid out as the BPF side writes them (bpf/op_record.h): op
// entries and exits with their exit cause, annotations matched by handle, autograd ranges
// matched per thread, stack samples, and what it must refuse.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "op_arguments.h"
#include "op_record.h"
#include "userspace/record_consumer.h"

namespace tprof {
namespace {

const MonotonicToUnix kIdentityClock(0);

op_record head(uint8_t kind, uint32_t tid, uint64_t ns, uint32_t op_id = 0, uint8_t exit_cause = 0) {
  op_record record{};
  record.timestamp_ns = ns;
  record.sequence_counter = SEQUENCE_COUNTER_UNKNOWN;
  record.tid = tid;
  record.tgid = 100;
  record.op_id = op_id;
  record.kind = kind;
  record.exit_cause = exit_cause;
  record.abi_version = OP_RECORD_ABI_VERSION;
  return record;
}

template <typename Payload>
std::vector<std::byte> bytes_of(const op_record& record, const Payload& payload) {
  std::vector<std::byte> bytes(sizeof(record) + sizeof(payload));
  std::memcpy(bytes.data(), &record, sizeof(record));
  std::memcpy(bytes.data() + sizeof(record), &payload, sizeof(payload));
  return bytes;
}

std::vector<std::byte> bytes_of(const op_record& record) {
  std::vector<std::byte> bytes(sizeof(record));
  std::memcpy(bytes.data(), &record, sizeof(record));
  return bytes;
}

class RecordDecoderTest : public ::testing::Test {
 protected:
  RecordDecoder decoder_{spans_, samples_,
                         {.on_new_thread = [this](uint32_t tid) { new_threads_.push_back(tid); },
                          .on_stack_id = [this](uint64_t id) { stack_ids_.push_back(id); },
                          .decode_arguments = [](uint32_t, bool, const op_arguments&) { return std::vector<model::Value>{}; },
                          .annotation_operator = [this](std::string_view name) {
                            annotation_names_.emplace_back(name);
                            return 50u;
                          },
                          .node_operator = [](uint64_t vptr, model::RangeKind kind) {
                            return static_cast<uint32_t>(vptr + (kind == model::RangeKind::kBackwardNode ? 1 : 0));
                          }}};

  BuiltThreads build() { return std::move(spans_).build(1000, kIdentityClock); }

  SpanBuilder spans_;
  PythonSampleLog samples_;
  std::vector<uint32_t> new_threads_;
  std::vector<uint64_t> stack_ids_;
  std::vector<std::string> annotation_names_;
};

TEST_F(RecordDecoderTest, OpEntriesAndExitsBecomeSpansWithTheirExitCause) {
  op_record enter = head(OP_RECORD_ENTER, 7, 10, 3);
  enter.python_stack_id = 42;
  decoder_.decode(bytes_of(enter));
  decoder_.decode(bytes_of(head(OP_RECORD_ENTER, 7, 20, 4)));
  decoder_.decode(bytes_of(head(OP_RECORD_EXIT, 7, 30, 4, RANGE_EXIT_UNWOUND)));
  decoder_.decode(bytes_of(head(OP_RECORD_EXIT, 7, 40, 3)));
  EXPECT_EQ(decoder_.records(), 4u);
  EXPECT_EQ(decoder_.malformed_records(), 0u);
  EXPECT_EQ(new_threads_, std::vector<uint32_t>{7});
  EXPECT_EQ(stack_ids_, std::vector<uint64_t>{42});
  const BuiltThreads built = build();
  ASSERT_EQ(built.threads.size(), 1u);
  const auto& spans = built.threads[0].spans;
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].operator_index, 3u);
  EXPECT_EQ(spans[0].end_ns, 40u);
  EXPECT_FALSE(spans[0].unwound);
  EXPECT_EQ(spans[1].operator_index, 4u);
  EXPECT_EQ(spans[1].end_ns, 30u);
  EXPECT_TRUE(spans[1].unwound);
  EXPECT_EQ(built.span_stack_ids[0][0], 42u);
}

TEST_F(RecordDecoderTest, AnnotationsAreNamedAtEntryAndClosedByTheirHandle) {
  annotation_enter enter{};
  enter.handle = 0xabc;
  std::memcpy(enter.name, "## step ##", 10);
  enter.name_length = 10;
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_ENTER, 7, 10), enter));
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_EXIT, 7, 15), annotation_exit{0xdef}));  // not ours
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_EXIT, 7, 20), annotation_exit{0xabc}));
  EXPECT_EQ(annotation_names_, std::vector<std::string>{"## step ##"});
  const BuiltThreads built = build();
  ASSERT_EQ(built.threads[0].spans.size(), 1u);
  EXPECT_EQ(built.threads[0].spans[0].operator_index, 50u);
  EXPECT_EQ(built.threads[0].spans[0].end_ns, 20u);
}

TEST_F(RecordDecoderTest, AutogradRangesPairPerThreadAndKeepTheNodesSequenceNumber) {
  autograd_node node{.node = 1, .vptr = 200, .sequence_nr = 9, .thread_id = 1};
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_ENTER, 7, 10), node));
  decoder_.decode(bytes_of(head(OP_RECORD_NODE_ENTER, 7, 11), node));
  decoder_.decode(bytes_of(head(OP_RECORD_NODE_EXIT, 7, 20, 0, RANGE_EXIT_UNWOUND)));
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_EXIT, 7, 20, 0, RANGE_EXIT_UNWOUND)));
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_EXIT, 8, 25)));  // entered before attach
  const BuiltThreads built = build();
  ASSERT_EQ(built.threads.size(), 1u) << "an exit with nothing open is dropped";
  const auto& spans = built.threads[0].spans;
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].operator_index, 200u);  // evaluate_function
  EXPECT_EQ(spans[1].operator_index, 201u);  // the node
  EXPECT_EQ(spans[1].sequence_number, 9);
  EXPECT_TRUE(spans[0].unwound);
  EXPECT_TRUE(spans[1].unwound);
}

TEST_F(RecordDecoderTest, StackSamplesGoToTheSampleLog) {
  op_record sample = head(OP_RECORD_PYTHON_SAMPLE, 9, 10);
  sample.python_stack_id = 5;
  decoder_.decode(bytes_of(sample));
  ASSERT_EQ(samples_.count(), 1u);
  EXPECT_EQ(samples_.by_thread().at(9)[0].stack_id, 5u);
}

TEST_F(RecordDecoderTest, RefusesShortRecordsOtherAbiVersionsAndUnknownKinds) {
  const std::vector<std::byte> whole = bytes_of(head(OP_RECORD_ENTER, 7, 10, 1));
  decoder_.decode(std::span(whole).first(sizeof(op_record) - 1));
  op_record other_version = head(OP_RECORD_ENTER, 7, 10, 1);
  other_version.abi_version = OP_RECORD_ABI_VERSION + 1;
  decoder_.decode(bytes_of(other_version));
  decoder_.decode(bytes_of(head(200, 7, 10)));
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_ENTER, 7, 10)));  // its payload is missing
  EXPECT_EQ(decoder_.malformed_records(), 4u);
  EXPECT_TRUE(build().threads.empty());
}

}  // namespace
}  // namespace tprof
