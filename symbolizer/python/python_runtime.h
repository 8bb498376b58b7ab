// Finds the CPython interpreter inside a running process and works out how to read its
// threads, frames and code objects from outside: which ELF holds the runtime, where it is
// loaded, which version it is, and the offsets of every field the stack walk reads.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "symbolizer/python/python_layout.h"

namespace tprof::symbolizer {

// The interpreter of process `pid`: a mapped libpythonX.Y.so, or else the main executable if
// it exports _PyRuntime (a statically linked python3.X). Supports CPython 3.9–3.14, default
// (GIL) builds, on x86-64.
//
// nullopt, with one line saying why in *why_not (if given), when the process runs no CPython,
// runs an unsupported version ("Python 3.8 is not supported (3.9–3.14 are)") or a
// free-threaded build, or cannot be inspected (gone, no permission).
//
// The thread-list offsets (interpreters.head, interp->next, interp->threads.head,
// tstate->next) are decoded from the machine code of the exported accessors; every other
// offset comes from the built-in tables (3.9–3.12) or the interpreter's _Py_DebugOffsets
// (3.13+). A decoded value that disagrees with the table wins, and the result's warnings say
// so.
std::optional<PythonLayout> discover_python(pid_t pid, std::string* why_not);

}  // namespace tprof::symbolizer
