// The plan cache's encoding: explicit little-endian fixed-width integers and length-prefixed
// strings, so that an entry reads the same whatever wrote it. Reading checks every length
// against what is left: a damaged entry is reported (MalformedBytes), never read past its end,
// and a corrupt count cannot make tprof allocate gigabytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tprof {

struct MalformedBytes : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ByteWriter {
 public:
  void u8(uint8_t value) { bytes_ += static_cast<char>(value); }
  void u16(uint16_t value) { little_endian(value, 2); }
  void u32(uint32_t value) { little_endian(value, 4); }
  void u64(uint64_t value) { little_endian(value, 8); }
  void i64(int64_t value) { u64(static_cast<uint64_t>(value)); }
  void boolean(bool value) { u8(value ? 1 : 0); }
  void string(std::string_view value);  // u32 length, then the bytes

  const std::string& bytes() const { return bytes_; }

 private:
  void little_endian(uint64_t value, size_t width);
  std::string bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}

  uint8_t u8() { return static_cast<uint8_t>(little_endian(1)); }
  uint16_t u16() { return static_cast<uint16_t>(little_endian(2)); }
  uint32_t u32() { return static_cast<uint32_t>(little_endian(4)); }
  uint64_t u64() { return little_endian(8); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  bool boolean();  // 0 or 1; anything else is malformed
  std::string string();
  // The bytes `size` ahead, as they are.
  std::string_view take(size_t size);
  // A count of elements that take at least `min_element_bytes` each: more than what is left
  // could hold is malformed.
  size_t count(size_t min_element_bytes);

  size_t left() const { return bytes_.size() - position_; }

 private:
  uint64_t little_endian(size_t width);
  std::string_view bytes_;
  size_t position_ = 0;
};

}  // namespace tprof
