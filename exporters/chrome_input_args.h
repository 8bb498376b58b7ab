// The record_shapes args of a Chrome-trace cpu_op, as Kineto writes them (formats.md §2.5.1):
// "Input Dims", "Input type", "Input Strides" and "Concrete Inputs", one entry per input.
#pragma once

#include <string>
#include <vector>

#include "model/trace_model.h"

namespace tprof::exporters {

// Appends `, "Input Dims": [...], "Input type": [...], "Input Strides": [...],
// "Concrete Inputs": [...]` for `inputs` to `out`.
void append_input_args(std::string& out, const std::vector<model::Value>& inputs);

// The "Input Dims" value alone: "[[4, 8], [8, 3], []]", as key_averages(group_by_input_shape)
// keys and shows it.
std::string input_dims_text(const std::vector<model::Value>& inputs);

}  // namespace tprof::exporters
