// Where torch::autograd::Node keeps sequence_nr_ and thread_id_ in the target's own build,
// read off the machine code of an exported function that constructs a Node.
//
// AccumulateGrad::AccumulateGrad(at::Tensor) (exported by libtorch_cpu since at least 1.13)
// inlines `Node(/*sequence_nr=*/UINT64_MAX)`, whose body ends with
// `thread_id_ = at::RecordFunction::currentThreadId();`. So, on its straight-line path from
// the entry, the one 8-byte all-ones value stored into *this is sequence_nr_ (every other
// Node field starts zero, false or null), and the value currentThreadId() returns is stored
// into thread_id_:
//
//   1.13, 2.6:  movdqa <{-1, 0}>(%rip),%xmm1; movups %xmm1,0x18(%rdi)
//               (sequence_nr_ = UINT64_MAX, topological_nr_ = 0)
//               call at::RecordFunction::currentThreadId()@plt; mov %rax,0x30(%rbx)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/relocations.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

struct NodeFieldOffsets {
  std::optional<uint32_t> sequence_nr;  // bytes into the Node
  std::optional<uint32_t> thread_id;
  std::string source;  // one line: which code said so, or why an offset is missing
};

// All arguments describe one libtorch_cpu.
NodeFieldOffsets find_node_field_offsets(const ElfFile& elf, const DefinedSymbols& symbols,
                                         const Relocations& relocations,
                                         const SectionMap& sections);

}  // namespace tprof::symbolizer
