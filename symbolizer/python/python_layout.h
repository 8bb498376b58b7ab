// Where a CPython interpreter keeps what a stack walker needs: the runtime, thread states,
// frames, code objects and strings. One instance describes one interpreter in one target
// process (addresses are the target's). Offsets are bytes from the start of the struct named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tprof::symbolizer {

struct PythonVersion {
  int major = 0;
  int minor = 0;
  int micro = 0;
  std::string to_string() const;  // "3.11.7"
};

// How a frame records the instruction it is executing.
enum class InstructionEncoding {
  kLastiBytes,        // 3.9: int f_lasti, a byte offset into co_code
  kLastiCodeUnits,    // 3.10: int f_lasti, an index of 2-byte code units
  kInstructionPointer // 3.11+: _Py_CODEUNIT* prev_instr/instr_ptr; offset from code + co_code_adaptive
};

struct PythonLayout {
  PythonVersion version;
  std::string interpreter_path;  // the ELF that holds the runtime, as mapped in the target
  bool from_debug_offsets = false;  // 3.13+: read from _PyRuntime's _Py_DebugOffsets

  // Runtime → interpreters → thread states.
  uint64_t runtime_address = 0;            // &_PyRuntime in the target
  uint32_t runtime_interpreters_head = 0;  // _PyRuntimeState.interpreters.head
  uint32_t interpreter_next = 0;           // PyInterpreterState.next
  uint32_t interpreter_threads_head = 0;   // PyInterpreterState.threads.head (tstate_head <=3.10)
  uint32_t thread_next = 0;                // PyThreadState.next
  uint32_t thread_thread_id = 0;           // PyThreadState.thread_id (pthread_self() == fsbase)
  int32_t thread_native_thread_id = -1;    // PyThreadState.native_thread_id (3.11+), -1 if absent

  // Thread state → innermost frame. thread_frame is tstate->frame (3.9/3.10),
  // tstate->cframe (3.11/3.12) or tstate->current_frame (3.13+); for 3.11/3.12 the frame is
  // then at cframe + cframe_current_frame.
  uint32_t thread_frame = 0;
  int32_t cframe_current_frame = -1;  // -1: thread_frame already points at the frame

  // Frames.
  uint32_t frame_code = 0;      // f_code / f_executable
  uint32_t frame_previous = 0;  // f_back / previous
  uint32_t frame_instruction = 0;
  InstructionEncoding instruction_encoding = InstructionEncoding::kLastiBytes;
  int32_t frame_owner = -1;        // 3.12+: owner (char); -1 if absent
  int32_t frame_owner_cstack = -1; // owner value of C-stack shim frames to skip (3 on 3.12/3.13)
  int32_t frame_owner_interpreter = -1;  // 3.14: owner value 3 (interpreter sentinel), else -1
  uint32_t frame_localsplus = 0;   // first local variable slot (self of a method)
  uint64_t executable_tag_mask = 0;  // 3.14: f_executable is a tagged _PyStackRef; mask these bits off

  // Code objects.
  uint64_t code_type_address = 0;  // &PyCode_Type in the target (frames whose code's type differs are skipped)
  uint32_t code_filename = 0;
  uint32_t code_name = 0;
  int32_t code_qualname = -1;      // 3.11+, -1 if absent
  uint32_t code_firstlineno = 0;
  uint32_t code_linetable = 0;     // co_lnotab (3.9) / co_linetable (3.10+)
  int32_t code_adaptive = -1;      // 3.11+: co_code_adaptive (inline bytecode), -1 if absent
  int32_t code_code = -1;          // 3.9/3.10: co_code (a bytes object), -1 if absent
  int32_t code_localsplusnames = -1;  // 3.11+: the frame slots' names (a tuple of str), -1 if absent
  int32_t code_localspluskinds = -1;  // 3.11+: their kinds (a bytes object: CO_FAST_CELL...), -1 if absent
  int32_t code_varnames = -1;      // 3.9/3.10: the slots' names apart (tuples of str), -1 if absent
  int32_t code_cellvars = -1;
  int32_t code_freevars = -1;

  // Objects, strings, bytes.
  uint32_t object_type = 8;        // ob_type
  uint32_t type_name = 24;         // PyTypeObject.tp_name (const char*)
  uint32_t type_mro = 344;         // PyTypeObject.tp_mro (a tuple of types), 3.9-3.14
  uint32_t tuple_size = 16;        // PyTupleObject.ob_size
  uint32_t tuple_items = 24;       // PyTupleObject.ob_item: 24, or 32 on 3.14 (after its ob_hash cache)
  uint32_t unicode_length = 16;
  uint32_t unicode_state = 32;
  uint32_t unicode_ascii_data = 0;    // sizeof(PyASCIIObject): 48 (<=3.11) or 40 (3.12+)
  uint32_t unicode_compact_data = 0;  // sizeof(PyCompactUnicodeObject): 72 or 56
  uint32_t bytes_size = 16;
  uint32_t bytes_data = 32;

  // Things discovery could not settle and worked around, one sentence each: a decoded offset
  // that disagrees with the table (the decoded one is used), a micro version left at 0.
  std::vector<std::string> warnings;
};

}  // namespace tprof::symbolizer
