// The fuzz targets of `tprof recover`: one input is one partial file's bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tprof::fuzz {

// Recovers `data` written as `partial_name` ("*.partial"), as `tprof recover` would. A refusal
// (std::exception, which the CLI prints as one line) is fine; a recovered file must be JSON.
void recover_input(const std::string& partial_name, const uint8_t* data, size_t size);

}  // namespace tprof::fuzz
