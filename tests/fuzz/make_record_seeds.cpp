// Writes fuzz_record_decoder's seed corpus (tests/fuzz/corpus/record_decoder) as the BPF side
// lays records out (bpf/op_record.h, bpf/op_arguments.h), framed as the target reads them.
// Built with the fuzz targets; rerun it when OP_RECORD_ABI_VERSION changes, or every seed
// record reads as malformed:  build-fuzz/tests/fuzz/make_record_seeds tests/fuzz/corpus/record_decoder
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "op_arguments.h"
#include "op_record.h"
#include "python_stack.h"
#include "tests/support/tensor_layouts.h"

namespace {

using Bytes = std::vector<uint8_t>;

op_record head(uint8_t kind, uint32_t tid, uint64_t ns, uint32_t op_id = 0) {
  op_record record{};
  record.timestamp_ns = ns;
  record.sequence_counter = SEQUENCE_COUNTER_UNKNOWN;
  record.tid = tid;
  record.tgid = 100;  // fuzz_record_decoder routes this process
  record.op_id = op_id;
  record.kind = kind;
  record.abi_version = OP_RECORD_ABI_VERSION;
  return record;
}

// Appends one framed record: its 2-byte length, its head, then `payload_size` bytes of payload.
void append(Bytes& out, const op_record& record, const void* payload = nullptr, size_t payload_size = 0) {
  const size_t size = sizeof(record) + payload_size;
  out.push_back(static_cast<uint8_t>(size));
  out.push_back(static_cast<uint8_t>(size >> 8));
  const auto* bytes = reinterpret_cast<const uint8_t*>(&record);
  out.insert(out.end(), bytes, bytes + sizeof(record));
  const auto* payload_bytes = static_cast<const uint8_t*>(payload);
  if (payload_size > 0) out.insert(out.end(), payload_bytes, payload_bytes + payload_size);
}

// As BPF sends them: cut after the last tensor copy.
void append_arguments(Bytes& out, const op_record& record, const op_arguments& arguments) {
  append(out, record, &arguments, offsetof(op_arguments, tensors) + arguments.tensor_count * sizeof(tensor_copy));
}

template <typename T>
void put(tensor_copy& copy, uint32_t offset, T value) {
  std::memcpy(copy.window + (offset - tprof::testing::torch113_tensor_impl_layout().dims), &value, sizeof(T));
}

// A contiguous float CPU tensor of `sizes` (at most 5 dims) in torch 1.13's layout.
tensor_copy tensor(uint64_t impl, const std::vector<int64_t>& sizes) {
  const auto layout = tprof::testing::torch113_tensor_impl_layout();
  tensor_copy copy{};
  copy.impl = impl;
  copy.storage_data = impl + 0x1000;
  put(copy, layout.dims, static_cast<uint64_t>(sizes.size()));
  int64_t stride = 1;
  for (size_t dim = sizes.size(); dim-- > 0; stride *= sizes[dim]) {
    put(copy, layout.inline_sizes + static_cast<uint32_t>(8 * dim), sizes[dim]);
    put(copy, layout.inline_strides + static_cast<uint32_t>(8 * dim), stride);
  }
  put(copy, layout.numel, stride);
  put(copy, layout.dtype, uint16_t{6});  // float
  put(copy, layout.device_has_value, uint8_t{1});
  put(copy, layout.device_index, int8_t{-1});
  return copy;
}

argument_value raw(uint8_t status, uint64_t value = 0, uint32_t length = 0) {
  argument_value argument{};
  argument.status = status;
  argument.value = value;
  argument.length = length;
  return argument;
}

// aten::op0(Tensor, Tensor, Scalar) nested in a record_function range, then a backward node.
Bytes ops_and_ranges() {
  Bytes out;
  annotation_enter annotation{.handle = 0xa000, .name_length = 4, .reserved = 0, .name = "step"};
  append(out, head(OP_RECORD_ANNOTATION_ENTER, 7, 10), &annotation, sizeof(annotation));
  op_arguments inputs{};
  inputs.argument_count = 3;
  inputs.tensor_count = 2;
  inputs.out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
  inputs.arguments[0] = raw(ARGUMENT_TENSOR);
  inputs.arguments[1] = raw(ARGUMENT_TENSOR);
  inputs.arguments[1].first_tensor = 1;
  inputs.arguments[2] = raw(ARGUMENT_SCALAR, 1, 1);
  inputs.tensors[0] = tensor(0x5000, {2, 3});
  inputs.tensors[1] = tensor(0x6000, {2, 3});
  append_arguments(out, head(OP_RECORD_ENTER, 7, 20, 0), inputs);
  op_record sample = head(OP_RECORD_PYTHON_SAMPLE, 7, 25);
  sample.python_stack_id = 9;
  append(out, sample);
  op_arguments returns{};
  returns.argument_count = 1;
  returns.tensor_count = 1;
  returns.out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
  returns.arguments[0] = raw(ARGUMENT_TENSOR);
  returns.tensors[0] = tensor(0x7000, {2, 3});
  append_arguments(out, head(OP_RECORD_EXIT, 7, 30, 0), returns);
  annotation_exit annotation_end{.handle = 0xa000};
  append(out, head(OP_RECORD_ANNOTATION_EXIT, 7, 40), &annotation_end, sizeof(annotation_end));
  autograd_node node{.node = 0xb000, .vptr = 0xc001, .sequence_nr = 3, .thread_id = 1};
  append(out, head(OP_RECORD_EVALUATE_ENTER, 8, 50), &node, sizeof(node));
  Bytes node_payload(sizeof(node) + offsetof(op_arguments, tensors) + sizeof(tensor_copy));
  std::memcpy(node_payload.data(), &node, sizeof(node));
  std::memcpy(node_payload.data() + sizeof(node), &returns, node_payload.size() - sizeof(node));
  append(out, head(OP_RECORD_NODE_ENTER, 8, 51), node_payload.data(), node_payload.size());
  append(out, head(OP_RECORD_NODE_EXIT, 8, 58));
  append(out, head(OP_RECORD_EVALUATE_EXIT, 8, 59));
  annotation_enter counter{.handle = 0xd000, .name_length = 35, .scope = ANNOTATION_SCOPE_WAIT_COUNTER, .reserved = 0,
                           .name = "pytorch.wait_counter.dynamo_compile"};
  append(out, head(OP_RECORD_ANNOTATION_ENTER, 7, 60), &counter, sizeof(counter));
  recompile_reason reason{.handle = 0xd000, .length = 43, .reserved = 0,
                          .text = "0/0: tensor 'x' size mismatch at index 0. e"};
  append(out, head(OP_RECORD_RECOMPILE_REASON, 7, 69), &reason, sizeof(reason));
  annotation_exit counter_end{.handle = 0xd000};
  append(out, head(OP_RECORD_ANNOTATION_EXIT, 7, 70), &counter_end, sizeof(counter_end));
  return out;
}

// aten::op2(Tensor?[], int[], SymInt[], bool) whose lists go on in list-element records, a
// spilled double of aten::op3, and an op past OP_ARGUMENTS_MAX arguments.
Bytes lists_and_spills() {
  Bytes out;
  op_arguments inputs{};
  inputs.argument_count = 4;
  inputs.tensor_count = 1;
  inputs.out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
  inputs.arguments[0] = raw(ARGUMENT_TENSOR_LIST, 0b10, 3);
  inputs.arguments[0].tensor_count = 1;
  inputs.arguments[1] = raw(ARGUMENT_INT_LIST, 0, 3);
  inputs.arguments[1].int_count = 2;
  inputs.arguments[2] = raw(ARGUMENT_INT_LIST, 0, 1);
  inputs.arguments[2].first_int = 2;
  inputs.arguments[2].int_count = 1;
  inputs.arguments[3] = raw(ARGUMENT_WORD, 1);
  inputs.int_values[0] = 4;
  inputs.int_values[1] = 5;
  inputs.int_values[2] = 6;
  inputs.tensors[0] = tensor(0x5000, {4});
  append_arguments(out, head(OP_RECORD_ENTER, 7, 10, 2), inputs);
  list_elements ints{.argument = 1, .kind = LIST_OF_INTS, .count = 1, .reserved = 0, .first = 2, .ints = {7}};
  append(out, head(OP_RECORD_LIST_ELEMENTS, 7, 10, 2), &ints, offsetof(list_elements, ints) + sizeof(int64_t));
  list_elements tensors{.argument = 0, .kind = LIST_OF_TENSORS, .count = 1, .reserved = 0, .first = 2, .ints = {}};
  tensors.tensors[0] = tensor(0x8000, {1, 4});
  append(out, head(OP_RECORD_LIST_ELEMENTS, 7, 10, 2), &tensors, offsetof(list_elements, tensors) + sizeof(tensor_copy));
  append(out, head(OP_RECORD_EXIT, 7, 20, 2));
  op_arguments words{};
  words.argument_count = 6;
  words.out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
  for (int i = 1; i < 6; ++i) words.arguments[i] = raw(ARGUMENT_WORD, 0x0101);
  append_arguments(out, head(OP_RECORD_ENTER, 7, 30, 3), words);
  spilled_arguments spilled{};
  spilled.present = 1u << 1;
  spilled.words[1] = 0x3ff0000000000000;  // 1.0
  append(out, head(OP_RECORD_SPILLED_ARGUMENTS, 7, 31, 3), &spilled, sizeof(spilled));
  append_arguments(out, head(OP_RECORD_MORE_ARGUMENTS, 7, 31, 3), words);
  append(out, head(OP_RECORD_EXIT, 7, 40, 3));
  return out;
}

// aten::op5(Tensor, str, ...) with a string JSON must escape, and a new Python stack.
Bytes strings_and_stacks() {
  Bytes out;
  python_stack stack{};
  stack.depth = 2;
  stack.frames[0].code = 0x1234;
  stack.frames[1].code = 0x5678;
  append(out, head(OP_RECORD_PYTHON_STACK, 7, 5), &stack, offsetof(python_stack, frames) + 2 * sizeof(python_frame));
  op_arguments inputs{};
  inputs.argument_count = 2;
  inputs.out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
  inputs.arguments[0] = raw(ARGUMENT_ABSENT);
  const char text[] = "a\"b\\c\n\x01\xff";
  inputs.arguments[1] = raw(ARGUMENT_STRING, 0, sizeof(text) - 1);
  inputs.arguments[1].int_count = 2;
  std::memcpy(inputs.int_values, text, sizeof(text) - 1);
  op_record enter = head(OP_RECORD_ENTER, 7, 10, 5);
  enter.python_stack_id = 9;
  append_arguments(out, enter, inputs);
  append(out, head(OP_RECORD_EXIT, 7, 20, 5));
  return out;
}

// Ops called through torch.ops: an overload's, an overload packet's around it, and one torch
// never observes (record_function's enter), with their exits.
Bytes boxed_ops() {
  Bytes out;
  boxed_operator packet{.name_length = 8, .overload_length = 0, .candidates = 2, .reserved = 0, .name = "aten::mm",
                        .overload = ""};
  append(out, head(OP_RECORD_BOXED_OP_ENTER, 7, 10), &packet, sizeof(packet));
  boxed_operator overload{.name_length = 9, .overload_length = 6, .candidates = 1, .reserved = 0, .name = "aten::add",
                          .overload = "Tensor"};
  append(out, head(OP_RECORD_BOXED_OP_ENTER, 7, 11), &overload, sizeof(overload));
  append(out, head(OP_RECORD_BOXED_OP_EXIT, 7, 12));
  boxed_operator unobserved{.name_length = 36, .overload_length = 0, .candidates = 1, .reserved = 0,
                            .name = "profiler::_record_function_enter_new", .overload = ""};
  append(out, head(OP_RECORD_BOXED_OP_ENTER, 7, 13), &unobserved, sizeof(unobserved));
  append(out, head(OP_RECORD_BOXED_OP_EXIT, 7, 14));
  append(out, head(OP_RECORD_BOXED_OP_EXIT, 7, 20));
  return out;
}

void write(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string directory = argv[1];
  write(directory + "/ops_and_ranges", ops_and_ranges());
  write(directory + "/lists_and_spills", lists_and_spills());
  write(directory + "/strings_and_stacks", strings_and_stacks());
  write(directory + "/boxed_ops", boxed_ops());
  return 0;
}
