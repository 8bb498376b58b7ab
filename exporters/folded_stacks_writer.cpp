#include "exporters/folded_stacks_writer.h"

namespace tprof::exporters {
namespace {

// torch's translate table: characters that would split a frame or a line.
void append_frame_text(std::string& out, std::string_view text) {
  for (const char c : text) out += (c == ' ' || c == ';' || c == '\t' || c == '\n') ? '_' : c;
}

// "outermost;...;innermost;leaf ", torch's way.
void append_folded_stack(std::string& out, const model::PythonStack& stack, std::string_view leaf) {
  for (auto frame = stack.rbegin(); frame != stack.rend(); ++frame) {
    append_frame_text(out, frame->file);
    out += '(';
    out += std::to_string(frame->line);
    out += "):_";
    append_frame_text(out, frame->function);
    out += ';';
  }
  append_frame_text(out, leaf);
  out += ' ';
}

}  // namespace

void FoldedStacksWriter::op(const model::ClosedOp& closed) {
  const uint64_t self_us = self_times_.close(closed.span).self_ns / 1000;
  if (closed.stack == nullptr || closed.stack->empty() || self_us == 0) return;
  line_.clear();
  append_folded_stack(line_, *closed.stack, closed.op.name);
  line_ += std::to_string(self_us);
  line_ += '\n';
  out_.write(line_);
}

void MemoryStacksWriter::finish(const model::RunSummary& summary) {
  if (!summary.memory) return;
  std::string line;
  for (const model::MemoryHolder& holder : summary.memory->peak_holders) {
    if (holder.bytes <= 0) continue;
    line.clear();
    append_folded_stack(line, holder.stack, holder.op.empty() ? kNoRange : holder.op);
    line += std::to_string(holder.bytes);
    line += '\n';
    out_.write(line);
  }
}

}  // namespace tprof::exporters
