// The ops torch's RecordFunction never observes: c10::ObservedOperators::getUnobservedOperatorList
// (aten/src/ATen/core/dispatch/ObservedOperators.cpp, the same list in torch 1.13, 2.6 and
// 2.14), so torch.profiler shows none of their calls. The aten:: ones are among the most frequent
// calls; the profiler:: ones are record_function()'s own enter and exit, whose annotation range
// outlives the op that opens it, and would cut it short if they were ranges.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace tprof::symbolizer {

inline constexpr std::array<std::string_view, 8> kUnobservedOps = {
    "aten::size",      "aten::is_leaf",  "aten::output_nr",   "aten::_version",
    "aten::is_complex", "profiler::_record_function_enter", "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
};

inline bool is_unobserved_op(std::string_view op_name) {
  return std::find(kUnobservedOps.begin(), kUnobservedOps.end(), op_name) != kUnobservedOps.end();
}

}  // namespace tprof::symbolizer
