// Where CPython keeps the fields a stack walker reads, per minor version: built-in tables for
// 3.9–3.12 (measured on 3.9.18, 3.10.13, 3.11.7, 3.12.1; shared/docs/runtime-layouts.md §2)
// and, for 3.13+, the interpreter's own _Py_DebugOffsets at the start of _PyRuntime.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "symbolizer/python/python_layout.h"

namespace tprof::symbolizer {

// The first and last minor version of each kind of source.
constexpr int kFirstTableMinor = 9;
constexpr int kLastTableMinor = 12;
constexpr int kFirstDebugOffsetsMinor = 13;
constexpr int kLastDebugOffsetsMinor = 14;

// Fills every offset of `layout` (everything but the version, the addresses and the
// interpreter path) for layout.version.minor, which must be 9..12.
void apply_builtin_offsets(PythonLayout& layout);

// How many bytes of _Py_DebugOffsets the parse for `minor` (13 or 14) reads.
size_t debug_offsets_size(int minor);

// Fills every offset of `layout` from the _Py_DebugOffsets bytes read at _PyRuntime, for
// layout.version.minor (13 or 14), and sets from_debug_offsets. False with a reason when the
// cookie is missing, the version word names another minor version, the build is
// free-threaded, or an offset lies outside the struct it belongs to (a layout we misparse).
bool apply_debug_offsets(std::string_view debug_offsets, PythonLayout& layout,
                         std::string* why_not);

}  // namespace tprof::symbolizer
