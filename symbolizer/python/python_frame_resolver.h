// Turns a raw stack from the BPF walker into named frames: each code object read (once) from
// the target's memory, the executing line decoded, and nn.Module calls recognized with the
// class of their `self`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "python_stack.h"
#include "symbolizer/python/code_object_reader.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/python/python_layout.h"
#include "symbolizer/python/python_stacks.h"

namespace tprof {

class PythonFrameResolver {
 public:
  // Told of each code object the first time a stack shows it (runtimes that look for a function
  // of theirs: symbolizer/dynamo/recompile_reasons.h).
  using CodeObserver = std::function<void(uint64_t code_address, const symbolizer::CodeInfo& code)>;

  PythonFrameResolver(const symbolizer::PythonLayout& layout, pid_t pid, CodeObserver observe_code = {});

  // Frames whose code object cannot be read are left out.
  ResolvedStack resolve(const python_stack& raw);

 private:
  std::string class_name_of(uint64_t object_address);
  bool is_module_instance(uint64_t object_address);

  symbolizer::PythonLayout layout_;
  symbolizer::ProcessMemory memory_;
  symbolizer::CodeObjectCache code_objects_;
  std::unordered_map<uint64_t, std::string> class_names_;  // by type object address
  std::unordered_map<uint64_t, bool> module_types_;        // by type object address: an nn.Module class?
  CodeObserver observe_code_;
};

}  // namespace tprof
