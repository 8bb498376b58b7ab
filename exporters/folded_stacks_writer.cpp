#include "exporters/folded_stacks_writer.h"

#include <algorithm>

namespace tprof::exporters {
namespace {

// torch's translate table: characters that would split a frame or a line.
void append_frame_text(std::string& out, std::string_view text) {
  for (const char c : text) out += (c == ' ' || c == ';' || c == '\t' || c == '\n') ? '_' : c;
}

}  // namespace

void FoldedStacksWriter::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  const uint64_t duration_ns = span.end_ns - std::min(span.end_ns, span.start_ns);
  uint64_t children_ns = 0;
  if (const auto children = children_ns_.find(span.record_id); children != children_ns_.end()) {
    children_ns = children->second;
    children_ns_.erase(children);
  }
  if (span.parent_record_id != 0) children_ns_[span.parent_record_id] += duration_ns;
  const uint64_t self_us = (duration_ns - std::min(duration_ns, children_ns)) / 1000;
  if (closed.stack == nullptr || closed.stack->empty() || self_us == 0) return;
  line_.clear();
  for (auto frame = closed.stack->rbegin(); frame != closed.stack->rend(); ++frame) {
    append_frame_text(line_, frame->file);
    line_ += '(';
    line_ += std::to_string(frame->line);
    line_ += "):_";
    append_frame_text(line_, frame->function);
    line_ += ';';
  }
  append_frame_text(line_, closed.op.name);
  line_ += ' ';
  line_ += std::to_string(self_us);
  line_ += '\n';
  out_.write(line_);
}

}  // namespace tprof::exporters
