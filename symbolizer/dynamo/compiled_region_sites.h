// Where torch.compile's graphs are entered, seen from libtorch_python: dynamo's C frame
// evaluator opens a RecordFunction of FUNCTION scope around every call of a compiled graph,
// named "Torch-Compiled Region: <frame id>/<recompile count>" (and, on torch 2.6, one named
// "TorchDynamo Cache Lookup" around each guard check), whether or not a profiler runs. The name
// is a `const char*` handed to one exported function just before the RecordFunction is
// constructed:
// - torch 2.6: _pytorch_record_function_enter(const char* name): rdi; both ranges;
// - torch 2.14: dynamo_eval_custom_code(tstate, frame, code, const char* trace_annotation, ...):
//   rcx; the region only (2.14 no longer exports _pytorch_record_function_enter, and its cache
//   lookup range is opened from a site that names no symbol).
// torch 1.13 has neither: dynamo came with 2.0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "symbolizer/binary/library_index.h"

namespace tprof::symbolizer {

struct CompiledRegionSite {
  uint64_t file_offset = 0;  // of its entry, or of an emulated instruction soon after that keeps the name
  uint32_t name_argument = 0;  // which System V argument holds the name: 1 or 4
  std::string function;      // its symbol, for messages
};

// The site in `libtorch_python_path`, or none when it defines neither function. Throws
// std::runtime_error (one line, naming the file) when it cannot be read as an ELF file.
std::optional<CompiledRegionSite> find_compiled_region_site(const std::string& libtorch_python_path);
// The same, in a libtorch_python already read (the attach reads it once for every site it has).
std::optional<CompiledRegionSite> find_compiled_region_site(const LibraryIndex& libtorch_python);

}  // namespace tprof::symbolizer
