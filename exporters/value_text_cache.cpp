#include "exporters/value_text_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace tprof::exporters {
namespace {

using model::TensorValue;
using model::Value;

bool same_tensor_shape(const TensorValue& a, const TensorValue& b) {
  return a.sizes == b.sizes && a.strides == b.strides && a.dtype == b.dtype;
}

// Bit for bit, as the single double is compared: -0.0 and 0.0 print differently.
bool same_reals(const std::vector<double>& a, const std::vector<double>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](double x, double y) { return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y); });
}

bool same_value_shape(const Value& a, const Value& b) {
  return a.kind == b.kind && a.schema_type == b.schema_type && a.list_length == b.list_length &&
         a.boolean == b.boolean && std::bit_cast<uint64_t>(a.real) == std::bit_cast<uint64_t>(b.real) &&
         a.ints == b.ints && same_reals(a.reals, b.reals) && a.text == b.text && same_tensor_shape(a.tensor, b.tensor) &&
         std::equal(a.tensors.begin(), a.tensors.end(), b.tensors.begin(), b.tensors.end(), same_tensor_shape);
}

// A fast non-cryptographic mix, one multiply per word, over four independent lanes so that the
// multiplies overlap (a collision only costs a miss).
class ShapeHash {
 public:
  void add(uint64_t word) {
    uint64_t& lane = lanes_[words_++ % kLanes];
    lane = std::rotl((lane ^ word) * kMultiplier, 29);
  }
  template <typename Integers>
  void add_all(const Integers& words) {
    add(words.size());
    for (const auto word : words) add(static_cast<uint64_t>(word));
  }
  // A short string's length and first 8 bytes: dtype and schema type names differ there.
  void add_prefix(const std::string& text) {
    uint64_t head = 0;
    std::memcpy(&head, text.data(), std::min<size_t>(text.size(), sizeof(head)));
    add(head ^ (text.size() << 56));
  }
  void add_tensor(const TensorValue& tensor) {
    add_all(tensor.sizes);
    add_all(tensor.strides);
    add_prefix(tensor.dtype);
  }
  uint64_t value() const {
    uint64_t result = words_;
    for (const uint64_t lane : lanes_) result = std::rotl((result ^ lane) * kMultiplier, 31);
    return result;
  }

 private:
  static constexpr size_t kLanes = 4;
  static constexpr uint64_t kMultiplier = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio
  uint64_t lanes_[kLanes] = {1, 2, 3, 4};
  size_t words_ = 0;
};

}  // namespace

bool same_shapes_and_constants(const std::vector<Value>& a, const std::vector<Value>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same_value_shape);
}

// Over the fields same_shapes_and_constants compares (strings by their start).
uint64_t ValueTextCache::hash_shapes_and_constants(const std::vector<Value>& values) {
  ShapeHash hash;
  hash.add(values.size());
  for (const Value& value : values) {
    hash.add(static_cast<uint64_t>(value.kind) | uint64_t{value.list_length} << 8 | uint64_t{value.boolean} << 40);
    hash.add_prefix(value.schema_type);
    hash.add(std::bit_cast<uint64_t>(value.real));
    hash.add_all(value.ints);
    hash.add(value.reals.size());
    for (const double real : value.reals) hash.add(std::bit_cast<uint64_t>(real));
    hash.add_prefix(value.text);
    hash.add_tensor(value.tensor);
    for (const TensorValue& tensor : value.tensors) hash.add_tensor(tensor);
  }
  return hash.value();
}

}  // namespace tprof::exporters
