// Remembers the text a writer formats from an op's values where that text depends only on their
// shapes, types and constants (Chrome's "Input Dims"/"Input type"/"Input Strides"/"Concrete
// Inputs", the ET's "shapes"/"types"/"strides"), not on which tensors they are. A training loop
// calls the same ops with the same shapes step after step, and formatting those lists was a
// large part of what a range cost to write (docs/BENCHMARKS.md, pipeline throughput).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"

namespace tprof::exporters {

// Whether two value lists agree in everything but which tensors and storages they name: kind,
// schema type, sizes, strides, dtype, ints, list length, bool and double (bit for bit).
bool same_shapes_and_constants(const std::vector<model::Value>& a, const std::vector<model::Value>& b);

class ValueTextCache {
 public:
  // Distinct value lists remembered; past it the cache starts over. At most 16 values (and their
  // text) each, a few KB.
  static constexpr size_t kMaxEntries = 1024;
  // Lookups per window. A window in which fewer than half hit (shapes that keep changing, as in
  // inference on ever new sequence lengths) turns the cache off for the next kIdleWindows
  // windows: a miss costs more than formatting directly.
  static constexpr uint32_t kWindow = 4096;
  static constexpr uint32_t kIdleWindows = 16;

  // Appends to `out` what `format(out, values)` appends for `values`: remembered from an earlier
  // list with the same shapes and constants, or formatted now. `format` must depend on nothing
  // else.
  template <typename Format>
  void append(std::string& out, const std::vector<model::Value>& values, Format format) {
    if (idle_lookups_ > 0) {
      --idle_lookups_;
      format(out, values);
      return;
    }
    const std::string& text = remembered(values, format);
    out += text;
    count_lookup();
  }

 private:
  struct Entry {
    std::vector<model::Value> values;
    std::string text;
  };
  static uint64_t hash_shapes_and_constants(const std::vector<model::Value>& values);

  template <typename Format>
  const std::string& remembered(const std::vector<model::Value>& values, Format format) {
    const uint64_t key = hash_shapes_and_constants(values);
    auto found = entries_.find(key);
    if (found != entries_.end() && same_shapes_and_constants(found->second.values, values)) {
      ++window_hits_;
      return found->second.text;
    }
    if (found == entries_.end()) {
      if (entries_.size() >= kMaxEntries) entries_.clear();
      found = entries_.try_emplace(key).first;
    }
    Entry& entry = found->second;  // new, or a different list with the same hash: replaced
    entry.values = values;
    entry.text.clear();
    format(entry.text, values);
    return entry.text;
  }

  void count_lookup() {
    if (++window_lookups_ < kWindow) return;
    if (window_hits_ * 2 < window_lookups_) {
      idle_lookups_ = kWindow * kIdleWindows;
      entries_.clear();
    }
    window_lookups_ = 0;
    window_hits_ = 0;
  }

  std::unordered_map<uint64_t, Entry> entries_;
  uint32_t window_lookups_ = 0;
  uint32_t window_hits_ = 0;
  uint32_t idle_lookups_ = 0;  // left to format directly
};

}  // namespace tprof::exporters
