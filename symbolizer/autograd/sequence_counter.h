// Where libtorch keeps each thread's autograd sequence counter (at::sequence_number): the
// number the next backward node created on that thread gets. Reading it before and after an
// op tells which op created which node, the forward half of torch's fwdbwd flow links.
//
// The counter is a thread_local of libtorch_cpu reached through __tls_get_addr (general-
// dynamic TLS: the library is dlopen'ed with torch._C), so its place is a pair read at run
// time from the GOT, {module id, offset}, plus the counter's offset inside that TLS block.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "symbolizer/binary/library_index.h"

namespace tprof::symbolizer {

struct SequenceCounterLocation {
  uint64_t tls_index_address = 0;  // link-time address of the GOT's tls_index {module, offset}
  uint64_t field_offset = 0;       // the counter's offset from what __tls_get_addr returns
};

// Read off the machine code of the exported at::sequence_number::peek(), which is
// `lea tls_index(%rip),%rdi; call __tls_get_addr; mov field(%rax),%rax`. nullopt and a one-line
// *why_not when the function is missing or does something else.
std::optional<SequenceCounterLocation> find_sequence_counter(const LibraryIndex& libtorch_cpu,
                                                             std::string* why_not);

}  // namespace tprof::symbolizer
