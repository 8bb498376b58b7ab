// libFuzzer target: the op tracer's ring-buffer records, decoded as `tprof attach` decodes them
// (RecordRouter -> RecordDecoder -> ArgumentDecoder, RangeOperators -> SpanCloser) into a
// Chrome trace, which must be valid JSON. The input is a sequence of records, each a 2-byte
// little-endian length and that many bytes (the last one cut where the input ends), so that
// the fuzzer varies record sizes as BPF does (records cut after their last tensor copy).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "exporters/chrome_trace_writer.h"
#include "exporters/output_file.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/support/tensor_layouts.h"
#include "userspace/assemble/range_operators.h"
#include "userspace/assemble/span_closer.h"
#include "userspace/ingest/argument_decoder.h"
#include "userspace/ingest/record_consumer.h"

namespace tprof::fuzz {
namespace {

constexpr uint32_t kTgid = 100;  // the process the seeds' records are of

// One op per schema type ArgumentDecoder tells apart, so that any op id a record names
// decodes its words, tensors and lists through one of them.
const std::vector<std::vector<std::string>> kInputTypes = {
    {"Tensor", "Tensor", "Scalar"},
    {"Tensor[]", "int"},
    {"Tensor?[]", "int[]", "SymInt[]", "bool"},
    {"Tensor", "float", "float?", "int?", "SymInt", "SymInt?"},
    {"Tensor", "ScalarType?", "Layout?", "Device?", "bool?", "MemoryFormat?"},
    {"Tensor", "str", "Generator?", "bool[3]", "Device"},
    {"Tensor", "Scalar[]", "float[]", "Tensor?"},
};

std::vector<symbolizer::OpArgumentPlan> plans() {
  std::vector<symbolizer::OpArgumentPlan> plans;
  for (const auto& types : kInputTypes) {
    symbolizer::OpArgumentPlan plan;
    for (const std::string& type : types)
      plan.inputs.push_back({.name = "a", .schema_type = type, .cxx_type = "", .bpf = {}, .xmm_register = {}});
    plan.return_types = {"Tensor", "int", "Tensor[]"};
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::vector<model::Operator> operators() {
  std::vector<model::Operator> operators;
  for (size_t i = 0; i < kInputTypes.size(); ++i) operators.emplace_back().name = "aten::op" + std::to_string(i);
  return operators;
}

// Splits `input` into records: a 2-byte little-endian length, then the record.
std::vector<std::span<const std::byte>> records_of(std::span<const std::byte> input) {
  std::vector<std::span<const std::byte>> records;
  while (input.size() >= 2) {
    const size_t length = std::to_integer<size_t>(input[0]) | std::to_integer<size_t>(input[1]) << 8;
    input = input.subspan(2);
    records.push_back(input.first(std::min(length, input.size())));
    input = input.subspan(records.back().size());
  }
  return records;
}

// Decodes `records` into a trace at `path`; the newest timestamp seen closes the window.
void write_trace(const std::vector<std::span<const std::byte>>& records, const std::string& path) {
  std::vector<model::Operator> table = operators();
  RangeOperators ranges(table, [](uint64_t vptr) { return vptr % 3 == 0 ? std::string() : "Node" + std::to_string(vptr % 5); });
  const ArgumentDecoder arguments(testing::torch113_tensor_impl_layout(), plans());
  exporters::OutputFile out(path, {.replace_existing = true, .keep_on_failure = false});
  exporters::ChromeTraceWriter writer(out, "fuzz.pt.trace.json");
  writer.begin(model::SessionInfo{});
  SpanCloser closer(table, {}, MonotonicToUnix(0), [](uint32_t tid) { return "thread " + std::to_string(tid); }, writer);
  RecordDecoder decoder(
      closer, {.on_new_thread = [](uint32_t) {},
               .on_stack_id = [](uint64_t) {},
               .decode_arguments = [&](uint32_t op_id, bool returns, const op_arguments& raw) { return arguments.decode(op_id, returns, raw); },
               .annotation_operator = [&](std::string_view name, model::RangeKind kind) { return ranges.annotation(name, kind); },
               .boxed_operator = [&](std::string_view name, std::optional<std::string_view> overload) {
                 return ranges.boxed_op(name, overload);
               },
               .node_operator = [&](uint64_t vptr, model::RangeKind kind) { return ranges.node(vptr, kind); },
               .on_device_activity = {},
               .on_python_stack = {},
               .complete_arguments = [&](uint32_t op_id, const spilled_arguments& spilled,
                                         std::vector<model::Value>& inputs) { arguments.complete(op_id, spilled, inputs); },
               .append_list_elements = [&](const list_elements& elements, std::vector<model::Value>& values) {
                 return arguments.append_list_elements(elements, values);
               },
               .complete_more_arguments = [&](uint32_t op_id, const op_arguments& raw, std::vector<model::Value>& inputs) {
                 arguments.complete_more(op_id, raw, inputs);
               }});
  RecordRouter router;
  router.route(kTgid, decoder);
  for (const auto record : records) router.route_record(record);
  closer.finish(router.last_timestamp_ns());
  writer.finish(model::RunSummary{});
  out.commit();
}

bool holds_json(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return nlohmann::json::accept(std::string{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()});
}

}  // namespace
}  // namespace tprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tprof::fuzz::scratch_directory() + "/records.pt.trace.json";
  tprof::fuzz::write_trace(tprof::fuzz::records_of({reinterpret_cast<const std::byte*>(data), size}), path);
  if (!tprof::fuzz::holds_json(path)) {
    std::fprintf(stderr, "the trace written from these records is not valid JSON: %s\n", path.c_str());
    std::abort();
  }
  return 0;
}
