#include "userspace/session/plan_bytes.h"

namespace tprof {

void ByteWriter::little_endian(uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) bytes_ += static_cast<char>((value >> (8 * i)) & 0xff);
}

void ByteWriter::string(std::string_view value) {
  u32(static_cast<uint32_t>(value.size()));
  bytes_ += value;
}

std::string_view ByteReader::take(size_t size) {
  if (size > left()) throw MalformedBytes("it ends inside a field");
  const std::string_view taken = bytes_.substr(position_, size);
  position_ += size;
  return taken;
}

uint64_t ByteReader::little_endian(size_t width) {
  const std::string_view field = take(width);
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= uint64_t{static_cast<unsigned char>(field[i])} << (8 * i);
  return value;
}

bool ByteReader::boolean() {
  const uint8_t value = u8();
  if (value > 1) throw MalformedBytes("a flag is " + std::to_string(value));
  return value == 1;
}

std::string ByteReader::string() {
  const uint32_t size = u32();
  return std::string(take(size));
}

size_t ByteReader::count(size_t min_element_bytes) {
  const uint64_t count = u32();
  if (min_element_bytes > 0 && count > left() / min_element_bytes)
    throw MalformedBytes("a count of " + std::to_string(count) + " exceeds what is left");
  return static_cast<size_t>(count);
}

}  // namespace tprof
