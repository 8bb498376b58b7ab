// The end-of-run count of what could not be read, by op and argument: every value written as
// unknown (and every list read only in part) is counted; values read in full are not.
#include "userspace/cli/unknown_values.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/trace_model.h"
#include "model/trace_sink.h"

namespace tprof {
namespace {

using model::Value;
using model::ValueKind;

Value unknown(const std::string& schema_type) { return {.kind = ValueKind::kUnknown, .schema_type = schema_type}; }

Value int_value(int64_t value) { return {.kind = ValueKind::kInt, .schema_type = "int", .ints = {value}}; }

void close(UnknownValuesSink& sink, const model::Operator& op, std::vector<Value> inputs, std::vector<Value> outputs = {},
           bool recorded = true) {
  model::OpSpan span;
  span.arguments_recorded = recorded;
  span.inputs = std::move(inputs);
  span.outputs = std::move(outputs);
  sink.op({.tid = 1, .span = span, .op = op});
}

TEST(UnknownValues, CountsUnknownValuesAndPartialListsByOpAndArgument) {
  const model::Operator rnn{"aten::mkldnn_rnn_layer_backward", ""};
  const model::Operator zeros{"aten::zeros", ""};
  UnknownValuesSink sink;
  close(sink, rnn, {int_value(1), unknown("int"), unknown("bool")});
  close(sink, rnn, {int_value(1), unknown("int"), int_value(0)});
  Value cut{.kind = ValueKind::kIntList, .schema_type = "SymInt[]", .ints = {2, 1}, .list_length = 9};
  close(sink, zeros, {cut}, {unknown("Tensor")});
  close(sink, zeros, {unknown("SymInt[]")}, {}, /*recorded=*/false);  // --no-shapes: nothing read, nothing missed
  EXPECT_EQ(sink.total(), 5u);
  EXPECT_EQ(sink.describe(),
            "5 values of 4 arguments could not be read in full (unknown, or lists cut short: only their first "
            "elements are written, at most 1024): "
            "aten::mkldnn_rnn_layer_backward input 1 (int) x2, aten::mkldnn_rnn_layer_backward input 2 (bool) x1, "
            "aten::zeros input 0 (SymInt[]) x1, aten::zeros return 0 (Tensor) x1");
  EXPECT_EQ(sink.describe(2).substr(sink.describe(2).size() - 5), ", ...");
}

TEST(UnknownValues, SaysNothingWhenEverythingWasRead) {
  UnknownValuesSink sink;
  close(sink, {"aten::add", ""}, {int_value(1)});
  EXPECT_EQ(sink.total(), 0u);
  EXPECT_EQ(sink.describe(), "");
}

}  // namespace
}  // namespace tprof
