// The readers tprof's fuzz targets drive take paths, not buffers (recover must see a real
// "*.partial" file, report opens through zlib): each input is written to a file first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tprof::fuzz {

// A directory of this process's own, made on first use: parallel fuzz jobs must not share files.
const std::string& scratch_directory();

// Writes `size` bytes to scratch_directory()/name, replacing what was there; returns the path.
std::string write_input(const std::string& name, const uint8_t* data, size_t size);

}  // namespace tprof::fuzz
