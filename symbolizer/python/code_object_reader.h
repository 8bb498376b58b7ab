// Reads CPython code objects out of a live process and keeps them, keyed by address: a stack
// sample carries (code pointer, instruction) per frame, and the same few thousand code objects
// recur in every sample, so each is copied out and decoded once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "symbolizer/python/bytecode_loops.h"
#include "symbolizer/python/line_table.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/python/python_layout.h"

namespace tprof::symbolizer {

// Copies exactly `size` bytes at `address` in the target into `out`; false if any byte cannot
// be read. ProcessMemory::read in production; tests feed fake memory.
using ReadMemory = std::function<bool(uint64_t address, void* out, size_t size)>;

// What a profile needs from one code object. Strings are UTF-8.
struct CodeInfo {
  std::string filename;  // co_filename
  std::string qualname;  // co_qualname (3.11+); co_name before, which has no qualname
  std::string name;      // co_name
  int first_line = 0;    // co_firstlineno
  LineTable lines;       // co_lnotab / co_linetable, decoded
  // Where its bytecode jumps backwards (bytecode_loops.h); nullopt when the bytecode could not
  // be read or decoded with certainty.
  std::optional<std::vector<BackwardJump>> loops;
};

// The line `instruction` is on, in the unit frames of this version record (see line_table.h:
// bytes on 3.9, code units on 3.10+); -1 if the table gives none.
int line(const CodeInfo& code, uint32_t instruction);

// Reads one code object; nullopt when it cannot be read, its type is not layout.code_type_address
// (a stale or garbage pointer), or a field holds something no code object would (a
// non-compact or oversized string, an oversized line table).
std::optional<CodeInfo> read_code_object(const PythonLayout& layout, const ReadMemory& read,
                                         uint64_t code_address);

// A code object's frame slots: slot i of its frames (f_localsplus) is names[i], of kind kinds[i]
// (CO_FAST_LOCAL, CO_FAST_CELL, CO_FAST_FREE bits). 3.11+ keeps them so (co_localsplusnames,
// co_localspluskinds); 3.9/3.10 in co_varnames, co_cellvars and co_freevars, in slot order.
struct FrameSlots {
  std::vector<std::string> names;
  std::vector<uint8_t> kinds;
};
constexpr uint8_t kSlotIsCell = 0x40;  // CO_FAST_CELL: the slot holds a cell

// nullopt when the layout locates neither form, or the slots cannot be read whole.
std::optional<FrameSlots> read_frame_slots(const PythonLayout& layout, const ReadMemory& read, uint64_t code_address);

// read_code_object with memoisation. Failures are remembered too: an address that is not a
// code object now will not become one while its module stays loaded, and retrying would cost
// a read per sample. Code freed and its address reused (module unload, exec) is not noticed;
// callers who care key on the address plus a fingerprint (runtime-layouts.md §2.4).
class CodeObjectCache {
 public:
  // layout.code_type_address must be set: it is how garbage pointers are told apart.
  CodeObjectCache(PythonLayout layout, ReadMemory read)
      : layout_(std::move(layout)), read_(std::move(read)) {}
  CodeObjectCache(PythonLayout layout, ProcessMemory memory)
      : CodeObjectCache(std::move(layout), [memory](uint64_t address, void* out, size_t size) {
          return memory.read(address, out, size);
        }) {}

  // The code object at `code_address`, or nullptr when it is unreadable or not a code object.
  // The pointer stays valid for the cache's lifetime. `read_now`, if given, says whether this
  // lookup was the address's first (the one that read it).
  const CodeInfo* lookup(uint64_t code_address, bool* read_now = nullptr);

 private:
  PythonLayout layout_;
  ReadMemory read_;
  std::unordered_map<uint64_t, std::optional<CodeInfo>> entries_;
};

}  // namespace tprof::symbolizer
