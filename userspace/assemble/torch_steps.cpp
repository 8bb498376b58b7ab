#include "userspace/assemble/torch_steps.h"

#include <algorithm>

namespace tprof {
namespace {

// The annotations of the parts of iterations at the window's edges (SpanCloser::PartialStep).
const char* partial_step_name(SpanCloser::PartialStep part) {
  switch (part) {
    case SpanCloser::PartialStep::kBeforeFirstBoundary: return "Partial step (in progress when first seen)";
    case SpanCloser::PartialStep::kAfterLastBoundary: return "Partial step (cut off by the stop)";
    case SpanCloser::PartialStep::kWindowStart: return "Partial step (in progress when a window of ops opened)";
    case SpanCloser::PartialStep::kWindowEnd: return "Partial step (cut off by a window's end)";
  }
  return "Partial step";
}

// --step-function [MODULE:]NAME: a frame of that function, NAME being its qualified name
// (Trainer.train_step) or its name (train_step), MODULE a module path matched against the
// frame's file (pkg.train: .../pkg/train.py).
std::function<bool(const ResolvedFrame&)> step_frame_matcher(const std::string& spec) {
  const size_t colon = spec.rfind(':');
  const std::string name = colon == std::string::npos ? spec : spec.substr(colon + 1);
  std::string file_suffix;
  if (colon != std::string::npos) {
    file_suffix = spec.substr(0, colon);
    std::replace(file_suffix.begin(), file_suffix.end(), '.', '/');
    file_suffix += ".py";
  }
  return [name, file_suffix](const ResolvedFrame& frame) {
    if (frame.qualified_name != name && frame.function != name) return false;
    return file_suffix.empty() || frame.file == file_suffix || frame.file.ends_with("/" + file_suffix);
  };
}

// The frames around the code that called Optimizer.step: its stack (innermost first) without
// torch's own innermost frames (record_function's __enter__, the optimizer's step wrapper).
size_t optimizer_caller_frames(const ResolvedStack& boundary) {
  size_t torch_frames = 0;
  while (torch_frames < boundary.size() && boundary[torch_frames].file.find("/torch/") != std::string::npos)
    ++torch_frames;
  return boundary.size() - torch_frames;
}

// torch.optim's record_function around every optimizer's step: "Optimizer.step#SGD.step".
bool is_optimizer_step(const model::Operator& op) {
  return op.kind == model::RangeKind::kUserAnnotation && op.name.starts_with("Optimizer.step#") &&
         op.name.ends_with(".step");
}

}  // namespace

SpanCloser::StepDetection torch_step_detection(const std::string& step_function,
                                               std::function<uint32_t(std::string_view name)> annotation) {
  return {.is_boundary = is_optimizer_step,
          .step_operator = [annotation](uint64_t step) { return annotation("ProfilerStep#" + std::to_string(step)); },
          .boundary_caller_frames = optimizer_caller_frames,
          .is_step_frame = step_function.empty() ? SpanCloser::StepDetection{}.is_step_frame
                                                 : step_frame_matcher(step_function),
          .partial_step_operator = [annotation](SpanCloser::PartialStep part) {
            return annotation(partial_step_name(part));
          }};
}

}  // namespace tprof
