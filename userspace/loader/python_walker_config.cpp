#include "userspace/loader/python_walker_config.h"

#include <algorithm>
#include <initializer_list>

#include "userspace/cli/error.h"

namespace tprof {
namespace {

// The smallest prefix of a struct that holds every field at `offsets` (each `size` bytes).
uint32_t prefix_covering(std::initializer_list<int64_t> offsets, uint32_t size) {
  int64_t end = 0;
  for (int64_t offset : offsets)
    if (offset >= 0) end = std::max(end, offset + size);
  return static_cast<uint32_t>(end);
}

}  // namespace

python_walker_config make_walker_config(const symbolizer::PythonLayout& layout) {
  python_walker_config config{};
  config.enabled = 1;
  config.runtime_address = layout.runtime_address;
  config.executable_tag_mask = layout.executable_tag_mask;
  config.runtime_interpreters_head = layout.runtime_interpreters_head;
  config.interpreter_threads_head = layout.interpreter_threads_head;
  config.thread_next = layout.thread_next;
  config.thread_thread_id = layout.thread_thread_id;
  config.thread_frame = layout.thread_frame;
  config.cframe_current_frame = layout.cframe_current_frame;
  config.frame_code = layout.frame_code;
  config.frame_previous = layout.frame_previous;
  config.frame_instruction = layout.frame_instruction;
  switch (layout.instruction_encoding) {
    case symbolizer::InstructionEncoding::kLastiBytes:
      config.instruction_encoding = PYTHON_INSTRUCTION_LASTI_BYTES;
      break;
    case symbolizer::InstructionEncoding::kLastiCodeUnits:
      config.instruction_encoding = PYTHON_INSTRUCTION_LASTI_CODE_UNITS;
      break;
    case symbolizer::InstructionEncoding::kInstructionPointer:
      config.instruction_encoding = PYTHON_INSTRUCTION_POINTER;
      break;
  }
  config.frame_owner = layout.frame_owner;
  config.frame_owner_skip_a = layout.frame_owner_cstack;
  config.frame_owner_skip_b = layout.frame_owner_interpreter;
  config.frame_localsplus = layout.frame_localsplus;
  config.code_adaptive = layout.code_adaptive;
  config.frame_read_size = prefix_covering(
      {layout.frame_code, layout.frame_previous, layout.frame_instruction, layout.frame_localsplus}, 8);
  config.frame_read_size = std::max(config.frame_read_size, prefix_covering({layout.frame_owner}, 1));
  config.tstate_read_size = prefix_covering({layout.thread_frame, layout.thread_thread_id}, 8);
  if (config.frame_read_size > PYTHON_FRAME_READ_MAX || config.tstate_read_size > PYTHON_TSTATE_READ_MAX)
    throw Error("Python " + layout.version.to_string() + ": frame layout exceeds the stack walker's buffers");
  return config;
}

}  // namespace tprof
