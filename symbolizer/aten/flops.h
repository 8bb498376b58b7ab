// Floating-point operations of an op, estimated from its captured inputs exactly as
// torch.profiler's with_flops=True does (torch/csrc/profiler/util.cpp saveExtraArgs and
// computeFlops): aten::conv2d, aten::mm, aten::addmm, aten::bmm, aten::baddbmm, aten::mul and
// aten::add; torch has no formula for other ops, backward ones included, and neither has tprof.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "model/trace_model.h"

namespace tprof::symbolizer {

// nullopt when torch estimates nothing for `op_name`, or the inputs it needs were not captured.
std::optional<uint64_t> estimate_flops(std::string_view op_name, const std::vector<model::Value>& inputs);

}  // namespace tprof::symbolizer
