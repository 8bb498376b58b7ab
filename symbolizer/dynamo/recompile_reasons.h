// Why dynamo compiled a frame again: the guard of its cached graph that failed, as dynamo words
// it ("0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"). Dynamo keeps it only
// as a Python str, in a local of `_compile` (torch/_dynamo/convert_frame.py), alive through the
// whole compile: torch 2.14's `recompile_reason` (a str), 2.6's `recompile_reasons` (a list, one
// per cached graph, most recent first; held in a cell because a nested function reads it). Its
// compile wait counter stops inside `_compile`, after the reason was set on both: the stop's
// probe reads it there (bpf/annotation_probes.bpf.h).
#pragma once

#include <cstdint>
#include <optional>

#include "recompile_reason_site.h"
#include "symbolizer/python/code_object_reader.h"
#include "symbolizer/python/python_layout.h"

namespace tprof::symbolizer {

// Whether `code` is dynamo's `_compile`: seen in a compile's stack, its address is looked at.
bool is_dynamo_compile(const CodeInfo& code);

// Where the frames of the `_compile` code object at `code_address` keep the reason; nullopt if
// they keep none this layout can read.
std::optional<recompile_reason_site> find_recompile_reason_site(const PythonLayout& layout, const ReadMemory& read,
                                                                uint64_t code_address);

}  // namespace tprof::symbolizer
