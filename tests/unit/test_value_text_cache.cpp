// ValueTextCache hands back what the formatter would write: remembered for lists with the same
// shapes and constants, formatted anew for anything that differs, and formatted directly while
// lookups keep missing.
#include "exporters/value_text_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exporters/chrome_input_args.h"
#include "model/trace_model.h"

namespace tprof::exporters {
namespace {

using model::TensorValue;
using model::Value;
using model::ValueKind;

Value tensor(uint64_t impl, model::Dims sizes, model::Dims strides, std::string dtype = "float") {
  Value value;
  value.kind = ValueKind::kTensor;
  value.schema_type = "Tensor";
  value.tensor.impl_address = impl;
  value.tensor.storage_address = impl + 0x1000;
  value.tensor.sizes = sizes;
  value.tensor.strides = strides;
  value.tensor.dtype = std::move(dtype);
  value.tensor.device = "cpu";
  return value;
}

Value integer(int64_t number) {
  Value value;
  value.kind = ValueKind::kInt;
  value.schema_type = "Scalar";
  value.ints = {number};
  return value;
}

Value real(double number) {
  Value value;
  value.kind = ValueKind::kDouble;
  value.schema_type = "float";
  value.real = number;
  return value;
}

// A formatter that counts its calls and writes what it was given.
struct CountingFormat {
  int* calls;
  void operator()(std::string& out, const std::vector<Value>& values) const {
    ++*calls;
    append_input_args(out, values);
  }
};

std::string direct(const std::vector<Value>& values) {
  std::string text;
  append_input_args(text, values);
  return text;
}

std::string through(ValueTextCache& cache, const std::vector<Value>& values, int* calls) {
  std::string text = "prefix";
  cache.append(text, values, CountingFormat{calls});
  return text.substr(6);
}

TEST(ValueTextCache, OtherTensorsOfTheSameShapesReuseTheText) {
  ValueTextCache cache;
  int calls = 0;
  const std::vector<Value> first{tensor(0x100, {2, 3}, {3, 1}), integer(1)};
  const std::vector<Value> second{tensor(0x900, {2, 3}, {3, 1}), integer(1)};
  EXPECT_EQ(through(cache, first, &calls), direct(first));
  EXPECT_EQ(through(cache, second, &calls), direct(second));
  EXPECT_EQ(calls, 1);
}

TEST(ValueTextCache, AnyDifferenceInShapeTypeOrConstantIsFormattedAnew) {
  const std::vector<Value> base{tensor(0x100, {2, 3}, {3, 1}), integer(1)};
  const std::vector<std::vector<Value>> variants{
      {tensor(0x100, {3, 2}, {3, 1}), integer(1)},           // sizes
      {tensor(0x100, {2, 3}, {1, 2}), integer(1)},           // strides
      {tensor(0x100, {2, 3}, {3, 1}, "double"), integer(1)}, // dtype
      {tensor(0x100, {2, 3}, {3, 1}), integer(2)},           // an int constant
      {tensor(0x100, {2, 3}, {3, 1}), real(1.0)},            // the same number as a double
      {tensor(0x100, {2, 3}, {3, 1})},                       // fewer values
  };
  for (const auto& variant : variants) {
    ValueTextCache cache;
    int calls = 0;
    through(cache, base, &calls);
    EXPECT_EQ(through(cache, variant, &calls), direct(variant));
    EXPECT_EQ(calls, 2);
    // Both stay remembered.
    EXPECT_EQ(through(cache, base, &calls), direct(base));
    EXPECT_EQ(through(cache, variant, &calls), direct(variant));
    EXPECT_EQ(calls, 2);
  }
}

TEST(ValueTextCache, ValuesThatNeverRepeatAreFormattedDirectlyAfterAWindow) {
  ValueTextCache cache;
  int calls = 0;
  for (int64_t i = 0; i < ValueTextCache::kWindow * 3; ++i) {
    const std::vector<Value> values{tensor(0x100, {i + 1, 2}, {2, 1})};
    ASSERT_EQ(through(cache, values, &calls), direct(values)) << i;
  }
  EXPECT_EQ(calls, ValueTextCache::kWindow * 3);
  // Idle now: even a list seen a moment ago is formatted, not looked up.
  const std::vector<Value> recent{tensor(0x100, {ValueTextCache::kWindow * 3, 2}, {2, 1})};
  EXPECT_EQ(through(cache, recent, &calls), direct(recent));
  EXPECT_EQ(calls, ValueTextCache::kWindow * 3 + 1);
}

TEST(ValueTextCache, RemembersAgainOnceTheIdleWindowsHavePassed) {
  ValueTextCache cache;
  int calls = 0;
  for (int64_t i = 0; i < ValueTextCache::kWindow; ++i) through(cache, {tensor(0x100, {i + 1, 2}, {2, 1})}, &calls);
  const std::vector<Value> repeated{tensor(0x100, {5, 5}, {5, 1})};
  for (uint32_t i = 0; i < ValueTextCache::kWindow * ValueTextCache::kIdleWindows; ++i)
    through(cache, repeated, &calls);
  const int calls_while_idle = calls;
  EXPECT_EQ(through(cache, repeated, &calls), direct(repeated));  // looked up again: remembered now
  EXPECT_EQ(through(cache, repeated, &calls), direct(repeated));
  EXPECT_EQ(calls, calls_while_idle + 1);
}

}  // namespace
}  // namespace tprof::exporters
