// The record decoder, fed bytes laid out as the BPF side writes them (bpf/op_record.h): op
// entries and exits with their exit cause, annotations matched by handle, autograd ranges
// matched per thread, stack samples, and what it must refuse.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <vector>

#include <algorithm>

#include "op_arguments.h"
#include "op_record.h"
#include "python_stack.h"
#include "tests/support/int_lists.h"
#include "tests/support/recording_sink.h"
#include "userspace/ingest/record_consumer.h"

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

std::vector<model::Operator> many_operators() {
  std::vector<model::Operator> operators(300);
  for (size_t i = 0; i < operators.size(); ++i) operators[i].name = "op" + std::to_string(i);
  return operators;
}

class RecordDecoderTest : public ::testing::Test {
 protected:
  // The ranges handed on, in start order.
  std::vector<model::OpSpan> build() {
    closer_.finish(1000);
    std::vector<model::OpSpan> spans;
    for (const auto& op : sink_.ops) spans.push_back(op.span);
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.record_id < b.record_id; });
    return spans;
  }

  std::vector<model::Operator> operators_ = many_operators();
  test::RecordingSink sink_;
  std::vector<uint64_t> looked_up_stacks_;
  SpanCloser closer_{operators_,
                     [this](uint64_t id) -> const StoredStack* {
                       looked_up_stacks_.push_back(id);
                       return nullptr;
                     },
                     kIdentityClock, [](uint32_t) { return std::string(); }, sink_};
  RecordDecoder decoder_{closer_,
                         {.on_new_thread = [this](uint32_t tid) { new_threads_.push_back(tid); },
                          .on_stack_id = [this](uint64_t id) { stack_ids_.push_back(id); },
                          .decode_arguments = [](uint32_t, bool, const op_arguments&) { return std::vector<model::Value>(2); },
                          .annotation_operator = [this](std::string_view name, model::RangeKind kind) {
                            annotation_names_.emplace_back(name);
                            annotation_kinds_.push_back(kind);
                            return 50u;
                          },
                          .boxed_operator = [this](std::string_view name,
                                                   std::optional<std::string_view> overload) -> std::optional<uint32_t> {
                            boxed_names_.push_back(std::string(name) + (overload ? "." + std::string(*overload) : ""));
                            if (name == "profiler::_record_function_enter_new") return std::nullopt;
                            return overload ? 61u : 60u;
                          },
                          .node_operator = [](uint64_t vptr, model::RangeKind kind) {
                            return static_cast<uint32_t>(vptr + (kind == model::RangeKind::kBackwardNode ? 1 : 0));
                          },
                          .on_device_activity = [this](const device_activity& activity) {
                            device_activities_.push_back(activity);
                          },
                          .on_python_stack = [this](uint64_t id, const python_stack& stack) {
                            sent_stacks_.push_back({id, stack.depth, stack.frames[0].code});
                          },
                          .complete_arguments = [](uint32_t, const spilled_arguments& spilled,
                                                   std::vector<model::Value>& inputs) {
                            inputs.at(1).kind = model::ValueKind::kInt;
                            inputs.at(1).ints = {static_cast<int64_t>(spilled.words[1])};
                          },
                          // Appends the chunk's ints to argument 0 as they come.
                          .append_list_elements = [](const list_elements& elements, std::vector<model::Value>& values) {
                            values.at(elements.argument).ints.insert(values.at(elements.argument).ints.end(),
                                                                     elements.ints, elements.ints + elements.count);
                            return true;
                          },
                          // Marks input 1 with the record's argument count.
                          .complete_more_arguments = [](uint32_t, const op_arguments& arguments,
                                                        std::vector<model::Value>& inputs) {
                            inputs.at(1).kind = model::ValueKind::kInt;
                            inputs.at(1).ints = {arguments.argument_count};
                          }}};

  struct SentStack {
    uint64_t id;
    uint32_t depth;
    uint64_t first_code;
    bool operator==(const SentStack&) const = default;
  };
  std::vector<SentStack> sent_stacks_;
  std::vector<device_activity> device_activities_;
  std::vector<uint32_t> new_threads_;
  std::vector<uint64_t> stack_ids_;
  std::vector<std::string> annotation_names_;
  std::vector<model::RangeKind> annotation_kinds_;
  std::vector<std::string> boxed_names_;  // "name.overload", or "name" with no overload known
};

boxed_operator boxed(std::string_view name, std::string_view overload, uint32_t candidates) {
  boxed_operator op{};
  op.name_length = static_cast<uint32_t>(name.size());
  op.overload_length = static_cast<uint32_t>(overload.size());
  op.candidates = candidates;
  name.copy(op.name, sizeof(op.name) - 1);
  overload.copy(op.overload, sizeof(op.overload) - 1);
  return op;
}

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
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].operator_index, 3u);
  EXPECT_EQ(spans[0].end_ns, 40u);
  EXPECT_FALSE(spans[0].unwound);
  EXPECT_EQ(spans[1].operator_index, 4u);
  EXPECT_EQ(spans[1].end_ns, 30u);
  EXPECT_TRUE(spans[1].unwound);
  EXPECT_EQ(looked_up_stacks_, std::vector<uint64_t>{42});
}

// An op id past the operator table (a record no probe of this plan wrote) is refused where it
// comes in: the closer would throw on it, ending the recording (found by fuzz_record_decoder).
TEST_F(RecordDecoderTest, OpOfNoOperatorIsMalformed) {
  decoder_.decode(bytes_of(head(OP_RECORD_ENTER, 7, 10, 3)));
  decoder_.decode(bytes_of(head(OP_RECORD_ENTER, 7, 20, static_cast<uint32_t>(operators_.size()))));
  decoder_.decode(bytes_of(head(OP_RECORD_EXIT, 7, 30, UINT32_MAX)));
  decoder_.decode(bytes_of(head(OP_RECORD_EXIT, 7, 40, 3)));
  EXPECT_EQ(decoder_.malformed_records(), 2u);
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].operator_index, 3u);
}

// An op's spill probe fires a few instructions after its entry probe: what it read completes
// that entry's inputs, and one that finds no such entry (tprof attached between the two) is
// counted.
TEST_F(RecordDecoderTest, SpilledArgumentsCompleteTheirThreadsNewestEntry) {
  op_arguments arguments{};
  spilled_arguments spilled{};
  spilled.present = 1u << 1;
  spilled.words[1] = 77;
  decoder_.decode(bytes_of(head(OP_RECORD_SPILLED_ARGUMENTS, 7, 5, 3), spilled));  // its entry came before attach
  decoder_.decode(bytes_of(head(OP_RECORD_ENTER, 7, 10, 3), arguments));
  decoder_.decode(bytes_of(head(OP_RECORD_SPILLED_ARGUMENTS, 7, 11, 3), spilled));
  decoder_.decode(bytes_of(head(OP_RECORD_EXIT, 7, 20, 3)));
  EXPECT_EQ(decoder_.unmatched_spilled_arguments(), 1u);
  EXPECT_EQ(decoder_.malformed_records(), 0u);
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 1u);
  ASSERT_EQ(spans[0].inputs.size(), 2u);
  EXPECT_EQ(spans[0].inputs[1].kind, model::ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(spans[0].inputs[1].ints), std::vector<int64_t>{77});
  decoder_.decode(bytes_of(head(OP_RECORD_SPILLED_ARGUMENTS, 7, 30, 3)));  // no payload
  EXPECT_EQ(decoder_.malformed_records(), 1u);
}

// A list's further elements follow the record they belong to, entry or exit, on its thread;
// a chunk whose record is not its thread's newest is counted, and one cut short is malformed.
TEST_F(RecordDecoderTest, ListElementsContinueTheirThreadsNewestRecord) {
  op_arguments arguments{};
  list_elements elements{};
  elements.kind = LIST_OF_INTS;
  elements.count = 2;
  elements.ints[0] = 5;
  elements.ints[1] = 6;
  const size_t chunk_bytes = offsetof(list_elements, ints) + 2 * sizeof(int64_t);
  auto chunk = [&](uint32_t tid, uint64_t ns, size_t bytes) {
    std::vector<std::byte> record = bytes_of(head(OP_RECORD_LIST_ELEMENTS, tid, ns, 3), elements);
    record.resize(sizeof(op_record) + bytes);
    return record;
  };
  decoder_.decode(bytes_of(head(OP_RECORD_ENTER, 7, 10, 3), arguments));
  decoder_.decode(chunk(7, 10, chunk_bytes));
  decoder_.decode(chunk(8, 10, chunk_bytes));  // thread 8 recorded nothing
  decoder_.decode(bytes_of(head(OP_RECORD_EXIT, 7, 20, 3), arguments));
  decoder_.decode(chunk(7, 20, chunk_bytes));  // a returned Tensor[]'s rest
  decoder_.decode(chunk(7, 20, chunk_bytes - 1));
  EXPECT_EQ(decoder_.unmatched_list_elements(), 1u);
  EXPECT_EQ(decoder_.malformed_records(), 1u);
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(tprof::testing::as_vector(spans[0].inputs.at(0).ints), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(tprof::testing::as_vector(spans[0].outputs.at(0).ints), (std::vector<int64_t>{5, 6}));
}

// Arguments past the 16th follow their entry like spilled ones: for its thread's newest entry.
TEST_F(RecordDecoderTest, MoreArgumentsCompleteTheirThreadsNewestEntry) {
  op_arguments arguments{};
  op_arguments more{};
  more.argument_count = 7;
  decoder_.decode(bytes_of(head(OP_RECORD_MORE_ARGUMENTS, 7, 5, 3), more));  // its entry came before attach
  decoder_.decode(bytes_of(head(OP_RECORD_ENTER, 7, 10, 3), arguments));
  decoder_.decode(bytes_of(head(OP_RECORD_MORE_ARGUMENTS, 7, 10, 3), more));
  decoder_.decode(bytes_of(head(OP_RECORD_EXIT, 7, 20, 3)));
  EXPECT_EQ(decoder_.unmatched_more_arguments(), 1u);
  EXPECT_EQ(decoder_.malformed_records(), 0u);
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(tprof::testing::as_vector(spans[0].inputs.at(1).ints), std::vector<int64_t>{7});
}

TEST_F(RecordDecoderTest, AnnotationsAreNamedAtEntryAndClosedByTheirHandle) {
  annotation_enter enter{};
  enter.handle = 0xabc;
  std::memcpy(enter.name, "## step ##", 10);
  enter.name_length = 10;
  enter.scope = 7;  // USER_SCOPE: record_function()
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_ENTER, 7, 10), enter));
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_EXIT, 7, 15), annotation_exit{0xdef}));  // not ours
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_EXIT, 7, 20), annotation_exit{0xabc}));
  EXPECT_EQ(annotation_names_, std::vector<std::string>{"## step ##"});
  EXPECT_EQ(annotation_kinds_, std::vector<model::RangeKind>{model::RangeKind::kUserAnnotation});
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].operator_index, 50u);
  EXPECT_EQ(spans[0].end_ns, 20u);
}

TEST_F(RecordDecoderTest, FunctionScopeRangesAreDynamosNamedRanges) {
  annotation_enter enter{};
  enter.handle = 0xabc;
  std::memcpy(enter.name, "Torch-Compiled Region: 0/1", 26);
  enter.name_length = 26;
  enter.scope = 0;  // FUNCTION: dynamo's frame evaluator
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_ENTER, 7, 10), enter));
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_EXIT, 7, 20), annotation_exit{0xabc}));
  EXPECT_EQ(annotation_names_, std::vector<std::string>{"Torch-Compiled Region: 0/1"});
  EXPECT_EQ(annotation_kinds_, std::vector<model::RangeKind>{model::RangeKind::kFunctionRange});
  ASSERT_EQ(build().size(), 1u);
}

// The entry of a compile's wait counter whose handle is 0xabc.
annotation_enter compile_counter_entry() {
  annotation_enter enter{};
  enter.handle = 0xabc;
  std::memcpy(enter.name, "pytorch.wait_counter.dynamo_compile", 35);
  enter.name_length = 35;
  enter.scope = ANNOTATION_SCOPE_WAIT_COUNTER;
  return enter;
}

TEST_F(RecordDecoderTest, WaitCounterRangesAreTheirOwnKind) {
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_ENTER, 7, 10), compile_counter_entry()));
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_EXIT, 7, 20), annotation_exit{0xabc}));
  EXPECT_EQ(annotation_names_, std::vector<std::string>{"pytorch.wait_counter.dynamo_compile"});
  EXPECT_EQ(annotation_kinds_, std::vector<model::RangeKind>{model::RangeKind::kWaitCounter});
  ASSERT_EQ(build().size(), 1u);
}

// A recompile's reason comes just before its counter's exit, and becomes the range's one output;
// a reason for another handle is left to that handle.
TEST_F(RecordDecoderTest, ARecompileReasonIsTheCounterRangesOutput) {
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_ENTER, 7, 10), compile_counter_entry()));
  recompile_reason other{.handle = 0xdef, .length = 5, .reserved = 0, .text = "other"};
  decoder_.decode(bytes_of(head(OP_RECORD_RECOMPILE_REASON, 7, 19), other));
  const std::string text = "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0";
  recompile_reason reason{.handle = 0xabc, .length = static_cast<__u32>(text.size()), .reserved = 0, .text = {}};
  std::memcpy(reason.text, text.data(), text.size());
  decoder_.decode(bytes_of(head(OP_RECORD_RECOMPILE_REASON, 7, 19), reason));
  decoder_.decode(bytes_of(head(OP_RECORD_ANNOTATION_EXIT, 7, 20), annotation_exit{0xabc}));
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 1u);
  ASSERT_EQ(spans[0].outputs.size(), 1u);
  EXPECT_EQ(spans[0].outputs[0].kind, model::ValueKind::kString);
  EXPECT_EQ(spans[0].outputs[0].text, text);
  EXPECT_FALSE(spans[0].arguments_recorded);  // no inputs: the ET writes none
  EXPECT_EQ(decoder_.malformed_records(), 0u);
}

// Boxed ops carry their name: an overload's call knows its overload, an overload packet's does
// not. Their exits pair per thread; one with nothing open (entered before attach) is dropped.
TEST_F(RecordDecoderTest, BoxedOpsAreNamedAtEntryAndPairPerThread) {
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_ENTER, 7, 10), boxed("aten::mm", "", 2)));
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_ENTER, 7, 11), boxed("aten::add", "Tensor", 1)));
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_EXIT, 7, 20, 0, RANGE_EXIT_UNWOUND)));
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_EXIT, 7, 30)));
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_EXIT, 8, 35)));
  EXPECT_EQ(boxed_names_, (std::vector<std::string>{"aten::mm", "aten::add.Tensor"}));
  EXPECT_EQ(decoder_.malformed_records(), 0u);
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].operator_index, 60u);
  EXPECT_EQ(spans[0].end_ns, 30u);
  EXPECT_FALSE(spans[0].unwound);
  EXPECT_EQ(spans[1].operator_index, 61u);
  EXPECT_EQ(spans[1].end_ns, 20u);
  EXPECT_TRUE(spans[1].unwound);
  EXPECT_FALSE(spans[1].arguments_recorded) << "a boxed op's arguments are not read";
}

// An op torch never observes is no range: its entry and its exit are dropped, and the ranges
// around it pair as if it were not there.
TEST_F(RecordDecoderTest, BoxedOpsTorchDoesNotObserveAreNoRange) {
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_ENTER, 7, 10), boxed("aten::mm", "", 2)));
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_ENTER, 7, 11), boxed("profiler::_record_function_enter_new", "", 1)));
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_EXIT, 7, 12)));
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_EXIT, 7, 30)));
  const std::vector<model::OpSpan> spans = build();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].operator_index, 60u);
  EXPECT_EQ(spans[0].end_ns, 30u);
  EXPECT_FALSE(spans[0].return_missing);
}

// A name cut at the buffer, or a length longer than what was copied, reads up to the NUL.
TEST_F(RecordDecoderTest, BoxedOpNamesStopAtTheirCopy) {
  boxed_operator op = boxed("aten::cos", "", 1);
  op.name_length = 500;
  decoder_.decode(bytes_of(head(OP_RECORD_BOXED_OP_ENTER, 7, 10), op));
  op_record short_record = head(OP_RECORD_BOXED_OP_ENTER, 7, 11);
  decoder_.decode(bytes_of(short_record, uint32_t{3}));
  EXPECT_EQ(boxed_names_, std::vector<std::string>{"aten::cos."});
  EXPECT_EQ(decoder_.malformed_records(), 1u);
}

TEST_F(RecordDecoderTest, AutogradRangesPairPerThreadAndKeepTheNodesSequenceNumber) {
  autograd_node node{.node = 1, .vptr = 200, .sequence_nr = 9, .thread_id = 1};
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_ENTER, 7, 10), node));
  decoder_.decode(bytes_of(head(OP_RECORD_NODE_ENTER, 7, 11), node));
  decoder_.decode(bytes_of(head(OP_RECORD_NODE_EXIT, 7, 20, 0, RANGE_EXIT_UNWOUND)));
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_EXIT, 7, 20, 0, RANGE_EXIT_UNWOUND)));
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_EXIT, 8, 25)));  // entered before attach
  const std::vector<model::OpSpan> spans = build();
  EXPECT_EQ(sink_.threads.size(), 1u) << "an exit with nothing open is dropped";
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].operator_index, 200u);  // evaluate_function
  EXPECT_EQ(spans[1].operator_index, 201u);  // the node
  EXPECT_EQ(spans[1].sequence_number, 9);
  EXPECT_TRUE(spans[0].unwound);
  EXPECT_TRUE(spans[1].unwound);
}

TEST_F(RecordDecoderTest, RemembersTheVtablesOfTheNodesSeenByEitherRecord) {
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_ENTER, 7, 10), autograd_node{.node = 1, .vptr = 200}));
  decoder_.decode(bytes_of(head(OP_RECORD_NODE_ENTER, 7, 11), autograd_node{.node = 2, .vptr = 300}));
  decoder_.decode(bytes_of(head(OP_RECORD_EVALUATE_ENTER, 7, 12), autograd_node{.node = 3, .vptr = 200}));
  EXPECT_EQ(decoder_.node_vtables(), (std::unordered_set<uint64_t>{200, 300}));
}

TEST_F(RecordDecoderTest, StackSamplesGoToTheCloserWithTheirStack) {
  op_record sample = head(OP_RECORD_PYTHON_SAMPLE, 9, 10);
  sample.python_stack_id = 5;
  decoder_.decode(bytes_of(sample));
  EXPECT_EQ(decoder_.python_samples(), 1u);
  EXPECT_EQ(stack_ids_, std::vector<uint64_t>{5});
  EXPECT_TRUE(build().empty());
  EXPECT_EQ(looked_up_stacks_, std::vector<uint64_t>{5});
  ASSERT_EQ(sink_.threads.size(), 1u);
  EXPECT_EQ(sink_.threads[0].tid, 9u);
}

TEST_F(RecordDecoderTest, GpuActivityGoesToItsCallbackNotToTheCloser) {
  device_activity kernel{};
  kernel.kind = DEVICE_ACTIVITY_KERNEL;
  kernel.correlation = 101;
  kernel.stream = 7;
  decoder_.decode(bytes_of(head(OP_RECORD_DEVICE_ACTIVITY, 9, 10, 0), kernel));
  ASSERT_EQ(device_activities_.size(), 1u);
  EXPECT_EQ(device_activities_[0].correlation, 101u);
  EXPECT_EQ(device_activities_[0].stream, 7u);
  closer_.finish(100);
  EXPECT_TRUE(sink_.ops.empty());
  EXPECT_TRUE(sink_.threads.empty()) << "the CUPTI thread that sent it is no thread of the trace";
  // Cut short: counted malformed, nothing handed on.
  std::vector<std::byte> short_record = bytes_of(head(OP_RECORD_DEVICE_ACTIVITY, 9, 20, 0), kernel);
  short_record.resize(short_record.size() - 1);
  decoder_.decode(short_record);
  EXPECT_EQ(device_activities_.size(), 1u);
  EXPECT_EQ(decoder_.malformed_records(), 1u);
}

// BPF sends a new stack cut after its last frame; it is no event of any thread.
TEST_F(RecordDecoderTest, NewStacksReachTheStoreAndNoThread) {
  python_stack stack{};
  stack.depth = 2;
  stack.frames[0].code = 0xc0de;
  stack.frames[1].code = 0xc0df;
  op_record record = head(OP_RECORD_PYTHON_STACK, 7, 10);
  record.python_stack_id = 42;
  std::vector<std::byte> bytes = bytes_of(record, stack);
  bytes.resize(sizeof(op_record) + offsetof(python_stack, frames) + 2 * sizeof(python_frame));
  decoder_.decode(bytes);
  EXPECT_EQ(sent_stacks_, (std::vector<SentStack>{{42, 2, 0xc0de}}));
  EXPECT_EQ(decoder_.malformed_records(), 0u);
  EXPECT_TRUE(new_threads_.empty());
  EXPECT_TRUE(stack_ids_.empty());
  // Fewer frames than its depth says: refused.
  bytes.resize(bytes.size() - 1);
  decoder_.decode(bytes);
  EXPECT_EQ(sent_stacks_.size(), 1u);
  EXPECT_EQ(decoder_.malformed_records(), 1u);
  EXPECT_TRUE(build().empty());
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
  EXPECT_TRUE(build().empty());
  EXPECT_TRUE(sink_.threads.empty());
}

// One ring buffer serves every target of a session: each record goes to the decoder of the
// process it names, records of no target are counted, and a target forgotten gets no more.
TEST(RecordRouter, HandsEachRecordToTheDecoderOfItsProcess) {
  std::vector<model::Operator> operators = many_operators();
  struct Target {
    test::RecordingSink sink;
    std::vector<uint32_t> threads;
  };
  Target first, second;
  auto closer_for = [&](Target& target) {
    return std::make_unique<SpanCloser>(operators, [](uint64_t) -> const StoredStack* { return nullptr; },
                                        kIdentityClock, [](uint32_t) { return std::string(); }, target.sink);
  };
  auto decoder_for = [](SpanCloser& closer, Target& target) {
    return std::make_unique<RecordDecoder>(
        closer, RecordDecoder::Callbacks{.on_new_thread = [&target](uint32_t tid) { target.threads.push_back(tid); },
                                         .decode_arguments = [](uint32_t, bool, const op_arguments&) {
                                           return std::vector<model::Value>();
                                         }});
  };
  const auto first_closer = closer_for(first);
  const auto second_closer = closer_for(second);
  const auto first_decoder = decoder_for(*first_closer, first);
  const auto second_decoder = decoder_for(*second_closer, second);
  RecordRouter router;
  router.route(100, *first_decoder);
  router.route(200, *second_decoder);

  auto of_process = [](op_record record, uint32_t tgid) {
    record.tgid = tgid;
    return bytes_of(record);
  };
  router.route_record(of_process(head(OP_RECORD_ENTER, 101, 10, 1), 100));
  router.route_record(of_process(head(OP_RECORD_ENTER, 201, 11, 2), 200));
  router.route_record(of_process(head(OP_RECORD_EXIT, 201, 15, 2), 200));
  router.route_record(of_process(head(OP_RECORD_EXIT, 101, 20, 1), 100));
  router.route_record(of_process(head(OP_RECORD_ENTER, 301, 21, 3), 300));  // no target
  const std::vector<std::byte> whole = of_process(head(OP_RECORD_ENTER, 101, 22, 1), 100);
  router.route_record(std::span(whole).first(sizeof(op_record) - 1));  // names no process
  EXPECT_EQ(router.last_timestamp_ns(), 20u) << "of the last record routed";
  router.forget(200, *first_decoder);  // not its decoder: still routed
  router.route_record(of_process(head(OP_RECORD_ENTER, 202, 25, 4), 200));
  router.route_record(of_process(head(OP_RECORD_EXIT, 202, 26, 4), 200));
  router.forget(200, *second_decoder);
  router.route_record(of_process(head(OP_RECORD_ENTER, 201, 30, 2), 200));
  EXPECT_EQ(router.unrouted(), 3u);

  EXPECT_EQ(first_decoder->records(), 2u);
  EXPECT_EQ(second_decoder->records(), 4u);
  EXPECT_EQ(first.threads, (std::vector<uint32_t>{101}));
  EXPECT_EQ(second.threads, (std::vector<uint32_t>{201, 202}));
  first_closer->finish(1000);
  second_closer->finish(1000);
  ASSERT_EQ(first.sink.ops.size(), 1u);
  EXPECT_EQ(first.sink.ops[0].span.operator_index, 1u);
  ASSERT_EQ(second.sink.ops.size(), 2u);
  EXPECT_EQ(second.sink.ops[0].span.operator_index, 2u);
  EXPECT_EQ(second.sink.ops[1].span.operator_index, 4u);
}

}  // namespace
}  // namespace tprof
