// CUPTI activity buffers built by hand from the toolkit's own record structs, as CUPTI hands them
// to a buffer-completed callback: each record 8-byte aligned, one after another.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tprof::testing {

class ActivityBuffer {
 public:
  template <typename Record>
  Record& add(CUpti_ActivityKind kind) {
    const size_t offset = bytes_.size();
    bytes_.resize(offset + (sizeof(Record) + 7) / 8 * 8);
    auto* record = reinterpret_cast<Record*>(bytes_.data() + offset);
    record->kind = kind;
    return *record;
  }
  size_t size() const { return bytes_.size(); }
  // A malloc'd copy, which the buffer-completed callback frees.
  uint8_t* release_copy() const {
    auto* copy = static_cast<uint8_t*>(std::aligned_alloc(8, (bytes_.size() + 7) / 8 * 8 + 8));
    std::memcpy(copy, bytes_.data(), bytes_.size());
    return copy;
  }
  uint8_t* data() { return bytes_.data(); }

 private:
  // uint64_t storage keeps the records 8-byte aligned.
  std::vector<uint8_t> bytes_;
};

}  // namespace tprof::testing
