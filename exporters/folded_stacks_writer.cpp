#include "exporters/folded_stacks_writer.h"

namespace tprof::exporters {
namespace {

// torch's translate table: characters that would split a frame or a line.
void append_frame_text(std::string& out, std::string_view text) {
  for (const char c : text) out += (c == ' ' || c == ';' || c == '\t' || c == '\n') ? '_' : c;
}

}  // namespace

void FoldedStacksWriter::op(const model::ClosedOp& closed) {
  const uint64_t self_us = self_times_.close(closed.span).self_ns / 1000;
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
