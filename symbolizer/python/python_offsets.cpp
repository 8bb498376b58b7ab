#include "symbolizer/python/python_offsets.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace tprof::symbolizer {
namespace {

// ---- _Py_DebugOffsets as CPython declares it ------------------------------------------------
// Mirrors of the struct, field for field, so the compiler computes the offsets. Each minor
// version has its own: 3.14 added fields in the middle. All members are uint64_t in both.

struct DebugOffsetsHeader {
  char cookie[8];    // "xdebugpy"
  uint64_t version;  // PY_VERSION_HEX
  uint64_t free_threaded;
};

struct RuntimeStateOffsets {
  uint64_t size, finalizing, interpreters_head;
};
struct ThreadStateOffsets {
  uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
      status;
};
struct PyObjectOffsets {
  uint64_t size, ob_type;
};
struct TypeObjectOffsets {
  uint64_t size, tp_name, tp_repr, tp_flags;
};
struct TupleOffsets {
  uint64_t size, ob_item, ob_size;
};
struct ListOffsets {
  uint64_t size, ob_item, ob_size;
};
struct DictOffsets {
  uint64_t size, ma_keys, ma_values;
};
struct FloatOffsets {
  uint64_t size, ob_fval;
};
struct LongOffsets {
  uint64_t size, lv_tag, ob_digit;
};
struct BytesOffsets {
  uint64_t size, ob_size, ob_sval;
};
struct UnicodeOffsets {
  uint64_t size, state, length, asciiobject_size;
};
struct GcOffsets {
  uint64_t size, collecting;
};

// CPython v3.13.0 Include/internal/pycore_runtime.h. Checked against the live 3.13.0 and
// 3.13.5 interpreters (every field, against gdb's offsets and the doc's tables).
struct DebugOffsets313 {
  DebugOffsetsHeader header;
  RuntimeStateOffsets runtime_state;
  struct {
    uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder;
  } interpreter_state;
  ThreadStateOffsets thread_state;
  struct {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner;
  } interpreter_frame;
  struct {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive;
  } code_object;
  PyObjectOffsets pyobject;
  TypeObjectOffsets type_object;
  TupleOffsets tuple_object;
  ListOffsets list_object;
  DictOffsets dict_object;
  FloatOffsets float_object;
  LongOffsets long_object;
  BytesOffsets bytes_object;
  UnicodeOffsets unicode_object;
  GcOffsets gc;
};
static_assert(sizeof(DebugOffsets313) == 584);

// CPython v3.14 Include/internal/pycore_debug_offsets.h (py-spy's hand-written mirror has the
// same 760 bytes). Unverified: no 3.14 interpreter was available to read it from.
struct DebugOffsets314 {
  DebugOffsetsHeader header;
  RuntimeStateOffsets runtime_state;
  struct {
    uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
        ceval_gil, gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder, code_object_generation, tlbc_generation;
  } interpreter_state;
  ThreadStateOffsets thread_state;
  struct {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
  } interpreter_frame;
  struct {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive, co_tlbc;
  } code_object;
  PyObjectOffsets pyobject;
  TypeObjectOffsets type_object;
  TupleOffsets tuple_object;
  ListOffsets list_object;
  struct {
    uint64_t size, used, table, mask;
  } set_object;
  DictOffsets dict_object;
  FloatOffsets float_object;
  LongOffsets long_object;
  BytesOffsets bytes_object;
  UnicodeOffsets unicode_object;
  GcOffsets gc;
  struct {
    uint64_t size, gi_name, gi_iframe, gi_frame_state;
  } gen_object;
  struct {
    uint64_t next, prev;
  } llist_node;
  struct {
    uint64_t eval_breaker, remote_debugger_support, remote_debugging_enabled, debugger_pending_call,
        debugger_script_path, debugger_script_path_size;
  } debugger_support;
};
static_assert(sizeof(DebugOffsets314) == 760);

constexpr char kDebugCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};

// _PyInterpreterFrame.owner values of frames with no Python code of their own.
constexpr int32_t kOwnerCStack313 = 3;       // FRAME_OWNED_BY_CSTACK (3.12, 3.13)
constexpr int32_t kOwnerInterpreter314 = 3;  // FRAME_OWNED_BY_INTERPRETER (3.14)
constexpr int32_t kOwnerCStack314 = 4;       // FRAME_OWNED_BY_CSTACK (3.14)

// 3.14's f_executable is a _PyStackRef; in GIL builds its lowest bit tags a deferred reference.
constexpr uint64_t kStackRefTagBits314 = 1;

// PyCompactUnicodeObject is PyASCIIObject plus utf8_length and utf8 (3.12+, after PEP 623
// removed wstr); _Py_DebugOffsets only gives the PyASCIIObject size.
constexpr uint32_t kCompactUnicodeExtra = 16;

// Copies the fields both parses share; `Offsets` is DebugOffsets313 or DebugOffsets314.
template <typename Offsets>
void copy_debug_offsets(const Offsets& offsets, PythonLayout& layout) {
  layout.runtime_interpreters_head = offsets.runtime_state.interpreters_head;
  layout.interpreter_next = offsets.interpreter_state.next;
  layout.interpreter_threads_head = offsets.interpreter_state.threads_head;
  layout.thread_next = offsets.thread_state.next;
  layout.thread_thread_id = offsets.thread_state.thread_id;
  layout.thread_native_thread_id = static_cast<int32_t>(offsets.thread_state.native_thread_id);
  layout.thread_frame = offsets.thread_state.current_frame;
  layout.cframe_current_frame = -1;
  layout.frame_code = offsets.interpreter_frame.executable;
  layout.frame_previous = offsets.interpreter_frame.previous;
  layout.frame_instruction = offsets.interpreter_frame.instr_ptr;
  layout.instruction_encoding = InstructionEncoding::kInstructionPointer;
  layout.frame_owner = static_cast<int32_t>(offsets.interpreter_frame.owner);
  layout.frame_localsplus = offsets.interpreter_frame.localsplus;
  layout.code_filename = offsets.code_object.filename;
  layout.code_name = offsets.code_object.name;
  layout.code_qualname = static_cast<int32_t>(offsets.code_object.qualname);
  layout.code_firstlineno = offsets.code_object.firstlineno;
  layout.code_linetable = offsets.code_object.linetable;
  layout.code_adaptive = static_cast<int32_t>(offsets.code_object.co_code_adaptive);
  layout.code_localsplusnames = static_cast<int32_t>(offsets.code_object.localsplusnames);
  layout.code_localspluskinds = static_cast<int32_t>(offsets.code_object.localspluskinds);
  layout.object_type = offsets.pyobject.ob_type;
  layout.type_name = offsets.type_object.tp_name;
  layout.unicode_length = offsets.unicode_object.length;
  layout.unicode_state = offsets.unicode_object.state;
  layout.unicode_ascii_data = offsets.unicode_object.asciiobject_size;
  layout.unicode_compact_data = offsets.unicode_object.asciiobject_size + kCompactUnicodeExtra;
  layout.tuple_size = offsets.tuple_object.ob_size;
  layout.tuple_items = offsets.tuple_object.ob_item;
  layout.bytes_size = offsets.bytes_object.ob_size;
  layout.bytes_data = offsets.bytes_object.ob_sval;
}

// Every offset we use must lie inside the struct it indexes; one that does not means the
// bytes were parsed with the wrong mirror (a layout change in a patch release, say).
template <typename Offsets>
std::string first_offset_outside_its_struct(const Offsets& offsets) {
  struct Check {
    const char* name;
    uint64_t offset;
    uint64_t struct_size;
  };
  const Check checks[] = {
      {"runtime_state.interpreters_head", offsets.runtime_state.interpreters_head,
       offsets.runtime_state.size},
      {"interpreter_state.next", offsets.interpreter_state.next, offsets.interpreter_state.size},
      {"interpreter_state.threads_head", offsets.interpreter_state.threads_head,
       offsets.interpreter_state.size},
      {"thread_state.next", offsets.thread_state.next, offsets.thread_state.size},
      {"thread_state.thread_id", offsets.thread_state.thread_id, offsets.thread_state.size},
      {"thread_state.native_thread_id", offsets.thread_state.native_thread_id,
       offsets.thread_state.size},
      {"thread_state.current_frame", offsets.thread_state.current_frame, offsets.thread_state.size},
      {"interpreter_frame.previous", offsets.interpreter_frame.previous,
       offsets.interpreter_frame.size},
      {"interpreter_frame.executable", offsets.interpreter_frame.executable,
       offsets.interpreter_frame.size},
      {"interpreter_frame.instr_ptr", offsets.interpreter_frame.instr_ptr,
       offsets.interpreter_frame.size},
      {"interpreter_frame.owner", offsets.interpreter_frame.owner, offsets.interpreter_frame.size},
      // localsplus is a flexible array member: it starts at the end of the struct.
      {"interpreter_frame.localsplus", offsets.interpreter_frame.localsplus,
       offsets.interpreter_frame.size + 1},
      {"code_object.filename", offsets.code_object.filename, offsets.code_object.size},
      {"code_object.name", offsets.code_object.name, offsets.code_object.size},
      {"code_object.qualname", offsets.code_object.qualname, offsets.code_object.size},
      {"code_object.linetable", offsets.code_object.linetable, offsets.code_object.size},
      {"code_object.firstlineno", offsets.code_object.firstlineno, offsets.code_object.size},
      {"code_object.localsplusnames", offsets.code_object.localsplusnames, offsets.code_object.size},
      {"code_object.localspluskinds", offsets.code_object.localspluskinds, offsets.code_object.size},
      // co_code_adaptive too (the inline bytecode).
      {"code_object.co_code_adaptive", offsets.code_object.co_code_adaptive,
       offsets.code_object.size + 1},
      {"pyobject.ob_type", offsets.pyobject.ob_type, offsets.pyobject.size},
      {"type_object.tp_name", offsets.type_object.tp_name, offsets.type_object.size},
      {"tuple_object.ob_size", offsets.tuple_object.ob_size, offsets.tuple_object.size},
      // ob_item is the tail array: it may start at the struct's end.
      {"tuple_object.ob_item", offsets.tuple_object.ob_item, offsets.tuple_object.size + 1},
      {"bytes_object.ob_size", offsets.bytes_object.ob_size, offsets.bytes_object.size},
      {"bytes_object.ob_sval", offsets.bytes_object.ob_sval, offsets.bytes_object.size},
      {"unicode_object.state", offsets.unicode_object.state, offsets.unicode_object.size},
      {"unicode_object.length", offsets.unicode_object.length, offsets.unicode_object.size},
      {"unicode_object.asciiobject_size", offsets.unicode_object.asciiobject_size,
       offsets.unicode_object.size},
  };
  for (const Check& check : checks) {
    if (check.offset >= check.struct_size) {
      return std::string(check.name) + " = " + std::to_string(check.offset) +
             " is outside its struct of " + std::to_string(check.struct_size) + " bytes";
    }
  }
  return {};
}

template <typename Offsets>
bool parse_debug_offsets(std::string_view bytes, PythonLayout& layout, std::string* why_not) {
  auto fail = [&](const std::string& reason) {
    if (why_not) {
      *why_not = "_Py_DebugOffsets of Python " + layout.version.to_string() + ": " + reason;
    }
    return false;
  };
  if (bytes.size() < sizeof(Offsets))
    return fail("only " + std::to_string(bytes.size()) + " bytes");
  Offsets offsets;
  std::memcpy(&offsets, bytes.data(), sizeof(offsets));
  if (std::memcmp(offsets.header.cookie, kDebugCookie, sizeof(kDebugCookie)) != 0) {
    return fail("no \"xdebugpy\" cookie at the start of _PyRuntime");
  }
  const uint64_t hex_version = offsets.header.version;
  const int major = static_cast<int>((hex_version >> 24) & 0xff);
  const int minor = static_cast<int>((hex_version >> 16) & 0xff);
  if (major != layout.version.major || minor != layout.version.minor) {
    return fail("its version word says " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (offsets.header.free_threaded != 0) {
    return fail("this is a free-threaded build (3." + std::to_string(minor) +
                "t), whose objects have another layout; only default (GIL) builds are supported");
  }
  if (std::string outside = first_offset_outside_its_struct(offsets); !outside.empty()) {
    return fail(outside);
  }
  copy_debug_offsets(offsets, layout);
  layout.from_debug_offsets = true;
  return true;
}

}  // namespace

void apply_builtin_offsets(PythonLayout& layout) {
  const int minor = layout.version.minor;
  if (minor < kFirstTableMinor || minor > kLastTableMinor) {
    throw std::logic_error("no built-in CPython offsets for 3." + std::to_string(minor));
  }
  layout.from_debug_offsets = false;

  // The same on 3.9–3.12.
  layout.interpreter_next = 0;
  layout.thread_next = 8;
  layout.object_type = 8;
  layout.type_name = 24;
  layout.unicode_length = 16;
  layout.unicode_state = 32;
  layout.bytes_size = 16;
  layout.bytes_data = 32;
  layout.tuple_size = 16;
  layout.tuple_items = 24;
  layout.frame_owner_interpreter = -1;
  layout.executable_tag_mask = 0;

  if (minor <= 10) {
    // PyFrameObject heap frames, reached through tstate->frame.
    layout.runtime_interpreters_head = 0x20;
    layout.interpreter_threads_head = 8;
    layout.thread_thread_id = 176;
    layout.thread_native_thread_id = -1;
    layout.thread_frame = 24;
    layout.cframe_current_frame = -1;
    layout.frame_code = 32;
    layout.frame_previous = 24;
    layout.frame_instruction = minor == 9 ? 104 : 96;
    layout.instruction_encoding =
        minor == 9 ? InstructionEncoding::kLastiBytes : InstructionEncoding::kLastiCodeUnits;
    layout.frame_owner = -1;
    layout.frame_owner_cstack = -1;
    layout.frame_localsplus = minor == 9 ? 360 : 352;
    layout.code_filename = 104;
    layout.code_name = 112;
    layout.code_qualname = -1;
    layout.code_firstlineno = 40;
    layout.code_linetable = 120;
    layout.code_adaptive = -1;
    layout.code_code = 48;
    layout.code_localsplusnames = -1;  // the slots' names apart, instead (offsetof in the headers)
    layout.code_localspluskinds = -1;
    layout.code_varnames = 72;
    layout.code_freevars = 80;
    layout.code_cellvars = 88;
    layout.unicode_ascii_data = 48;
    layout.unicode_compact_data = 72;
    return;
  }

  // _PyInterpreterFrame, reached through tstate->cframe->current_frame.
  layout.runtime_interpreters_head = 0x28;
  layout.thread_frame = 56;
  layout.frame_instruction = 56;  // prev_instr
  layout.instruction_encoding = InstructionEncoding::kInstructionPointer;
  layout.frame_localsplus = 72;
  layout.code_filename = 112;
  layout.code_name = 120;
  layout.code_qualname = 128;
  layout.code_linetable = 136;
  layout.code_localsplusnames = 96;  // the same on 3.11 and 3.12 (offsetof in their headers)
  layout.code_localspluskinds = 104;
  layout.code_varnames = layout.code_cellvars = layout.code_freevars = -1;
  if (minor == 11) {
    layout.interpreter_threads_head = 0x10;
    layout.thread_thread_id = 152;
    layout.thread_native_thread_id = 160;
    layout.cframe_current_frame = 8;
    layout.frame_code = 32;
    layout.frame_previous = 48;
    layout.frame_owner = -1;  // 3.11 has no C-stack shim frames to recognise
    layout.frame_owner_cstack = -1;
    layout.code_firstlineno = 72;
    layout.code_adaptive = 184;
    layout.unicode_ascii_data = 48;
    layout.unicode_compact_data = 72;
  } else {
    layout.interpreter_threads_head = 0x48;
    layout.thread_thread_id = 136;
    layout.thread_native_thread_id = 144;
    layout.cframe_current_frame = 0;
    layout.frame_code = 0;
    layout.frame_previous = 8;
    layout.frame_owner = 70;
    layout.frame_owner_cstack = kOwnerCStack313;
    layout.code_firstlineno = 68;
    layout.code_adaptive = 192;
    layout.unicode_ascii_data = 40;
    layout.unicode_compact_data = 56;
  }
}

size_t debug_offsets_size(int minor) {
  switch (minor) {
    case 13:
      return sizeof(DebugOffsets313);
    case 14:
      return sizeof(DebugOffsets314);
    default:
      throw std::logic_error("no _Py_DebugOffsets parse for 3." + std::to_string(minor));
  }
}

bool apply_debug_offsets(std::string_view debug_offsets, PythonLayout& layout,
                         std::string* why_not) {
  switch (layout.version.minor) {
    case 13:
      if (!parse_debug_offsets<DebugOffsets313>(debug_offsets, layout, why_not)) return false;
      layout.frame_owner_cstack = kOwnerCStack313;
      layout.frame_owner_interpreter = -1;
      layout.executable_tag_mask = 0;
      return true;
    case 14:
      if (!parse_debug_offsets<DebugOffsets314>(debug_offsets, layout, why_not)) return false;
      layout.frame_owner_cstack = kOwnerCStack314;
      layout.frame_owner_interpreter = kOwnerInterpreter314;
      layout.executable_tag_mask = kStackRefTagBits314;
      return true;
    default:
      throw std::logic_error("no _Py_DebugOffsets parse for 3." +
                             std::to_string(layout.version.minor));
  }
}

}  // namespace tprof::symbolizer
