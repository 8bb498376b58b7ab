// Addresses and offsets as the symbolizers' one-line explanations show them.
#pragma once

#include <cstdint>
#include <string>

namespace tprof::symbolizer {

// "0x1f": lower-case hex digits, no padding.
std::string hex(uint64_t value);

}  // namespace tprof::symbolizer
