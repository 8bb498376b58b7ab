// How torch's training iterations show in what tprof records, for the span closer's step
// detection: each Optimizer.step annotation ends one (torch.optim wraps every optimizer's
// step() in one), or each call of a named Python function does (--step-function); the parts
// of iterations at a window's edges are named partial steps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "userspace/assemble/span_closer.h"

namespace tprof {

// The step detection of a session: `annotation(name)` gives the operator of an annotation
// named so ("ProfilerStep#3", "Partial step (...)"); `step_function` is --step-function's
// [MODULE:]NAME, empty for steps ended by Optimizer.step.
SpanCloser::StepDetection torch_step_detection(const std::string& step_function,
                                               std::function<uint32_t(std::string_view name)> annotation);

}  // namespace tprof
