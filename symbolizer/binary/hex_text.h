// Addresses and offsets as the symbolizers' one-line explanations show them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tprof::symbolizer {

// "0x1f": lower-case hex digits, no padding.
std::string hex(uint64_t value);

// "feaefbc5": each byte as two lower-case hex digits (a build-id).
std::string hex_bytes(std::string_view bytes);

}  // namespace tprof::symbolizer
