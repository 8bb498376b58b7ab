// FLOPs as torch.profiler's with_flops estimates them, on the calls torch 2.6 itself was seen to
// give these numbers for (key_averages().flops): mm [8,16]x[16,4], addmm, bmm [2,8,16]x[2,16,4],
// conv2d [2,3,8,8] by [5,3,3,3] with padding 1, mul and add of [8,16].
#include "symbolizer/aten/flops.h"

#include <gtest/gtest.h>

namespace tprof::symbolizer {
namespace {

model::Value tensor(std::initializer_list<int64_t> sizes) {
  model::Value value;
  value.kind = model::ValueKind::kTensor;
  value.tensor.sizes.assign(sizes.begin(), sizes.end());
  return value;
}

model::Value int_list(std::initializer_list<int64_t> ints) {
  model::Value value;
  value.kind = model::ValueKind::kIntList;
  value.ints.assign(ints.begin(), ints.end());
  value.list_length = static_cast<uint32_t>(ints.size());
  return value;
}

model::Value integer(int64_t number) {
  model::Value value;
  value.kind = model::ValueKind::kInt;
  value.ints.push_back(number);
  return value;
}

TEST(Flops, MatchTorchsEstimates) {
  EXPECT_EQ(estimate_flops("aten::mm", {tensor({8, 16}), tensor({16, 4})}), 1024u);
  EXPECT_EQ(estimate_flops("aten::addmm", {tensor({8, 4}), tensor({8, 16}), tensor({16, 4}), integer(1), integer(1)}), 1024u);
  EXPECT_EQ(estimate_flops("aten::bmm", {tensor({2, 8, 16}), tensor({2, 16, 4})}), 2048u);
  EXPECT_EQ(estimate_flops("aten::baddbmm", {tensor({2, 8, 4}), tensor({2, 8, 16}), tensor({2, 16, 4})}), 2048u);
  EXPECT_EQ(estimate_flops("aten::conv2d", {tensor({2, 3, 8, 8}), tensor({5, 3, 3, 3}), {}, int_list({1, 1}),
                                            int_list({1, 1}), int_list({1, 1}), integer(1)}),
            34560u);
  EXPECT_EQ(estimate_flops("aten::mul", {tensor({8, 16}), tensor({8, 16})}), 128u);
  EXPECT_EQ(estimate_flops("aten::add", {tensor({8, 16}), tensor({8, 16}), integer(1)}), 128u);
}

TEST(Flops, NoneWithoutTheInputsOrAFormula) {
  EXPECT_FALSE(estimate_flops("aten::relu", {tensor({8, 16})})) << "torch has no formula";
  EXPECT_FALSE(estimate_flops("aten::mm", {tensor({8, 16}), model::Value{}})) << "an input not captured";
  EXPECT_FALSE(estimate_flops("aten::conv2d", {tensor({2, 3, 8, 8}), tensor({5, 3, 3, 3}), {}, int_list({1, 1}),
                                               int_list({1, 1}), int_list({1, 1}), integer(0)}))
      << "groups 0";
  EXPECT_EQ(estimate_flops("aten::mm", {tensor({8, 0}), tensor({0, 4})}), 0u) << "an empty inner dimension";
}

}  // namespace
}  // namespace tprof::symbolizer
