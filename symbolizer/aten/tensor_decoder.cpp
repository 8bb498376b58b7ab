#include "symbolizer/aten/tensor_decoder.h"

#include <cstring>

namespace tprof::symbolizer {

namespace {

// Cheap validity bounds (runtime-layouts.md §5): what no real tensor exceeds, and garbage
// read through a wrong pointer usually does.
constexpr uint64_t kDimsMax = 64;
constexpr int kScalarTypeIndexLimit = 64;
constexpr int kDeviceTypeLimit = 32;

// The TensorImpl's fields as the window holds them: window byte i is TensorImpl byte
// layout.dims + i.
class Window {
 public:
  Window(const tensor_copy& copy, const TensorImplLayout& layout)
      : copy_(copy), start_(layout.dims), bytes_(layout.to_bpf().window_bytes) {}

  // The value at TensorImpl offset `offset`; nullopt if BPF did not copy it.
  template <typename Value>
  std::optional<Value> at(uint32_t offset) const {
    if (offset < start_ || offset - start_ + sizeof(Value) > bytes_ ||
        offset - start_ + sizeof(Value) > TENSOR_WINDOW_BYTES) {
      return std::nullopt;
    }
    Value value;
    std::memcpy(&value, copy_.window + (offset - start_), sizeof(Value));
    return value;
  }

 private:
  const tensor_copy& copy_;
  uint32_t start_;
  uint32_t bytes_;
};

// The product of `sizes`; nullopt if it overflows int64.
template <typename Sizes>
std::optional<int64_t> element_count(const Sizes& sizes) {
  int64_t count = 1;
  for (int64_t size : sizes) {
    if (__builtin_mul_overflow(count, size, &count)) return std::nullopt;
  }
  return count;
}

}  // namespace

std::optional<DecodedTensor> decode_tensor(const tensor_copy& copy, const int64_t* out_of_line,
                                           const TensorImplLayout& layout) {
  if (copy.impl == 0) return std::nullopt;
  const Window window(copy, layout);
  const auto dims = window.at<uint64_t>(layout.dims);
  const auto storage_offset = window.at<int64_t>(layout.storage_offset);
  const auto numel = window.at<int64_t>(layout.numel);
  const auto dtype = window.at<uint16_t>(layout.dtype);
  const auto has_device = window.at<uint8_t>(layout.device_has_value);
  const auto device_type = window.at<int8_t>(layout.device_type);
  const auto device_index = window.at<int8_t>(layout.device_index);
  if (!dims || !storage_offset || !numel || !dtype || !has_device || !device_type ||
      !device_index) {
    return std::nullopt;  // a layout whose fields lie outside what BPF copies
  }

  DecodedTensor tensor;
  tensor.impl = copy.impl;
  tensor.storage_data = copy.storage_data;
  if (*has_device == 0 && *numel == 0) {
    tensor.defined = false;
    return tensor;
  }

  if (*dims > kDimsMax) return std::nullopt;
  const size_t dim_count = static_cast<size_t>(*dims);
  if (dim_count <= INLINE_DIMS_MAX) {
    for (size_t dim = 0; dim < dim_count; ++dim) {
      const uint32_t size_at = layout.inline_sizes + static_cast<uint32_t>(dim * sizeof(int64_t));
      const uint32_t stride_at =
          layout.inline_strides + static_cast<uint32_t>(dim * sizeof(int64_t));
      const auto size = window.at<int64_t>(size_at);
      const auto stride = window.at<int64_t>(stride_at);
      if (!size || !stride) return std::nullopt;
      tensor.sizes.push_back(*size);
      tensor.strides.push_back(*stride);
    }
  } else {
    if (out_of_line == nullptr || dim_count > OUT_OF_LINE_DIMS_MAX) return std::nullopt;
    tensor.sizes.assign(out_of_line, out_of_line + dim_count);
    tensor.strides.assign(out_of_line + dim_count, out_of_line + 2 * dim_count);
  }
  for (int64_t size : tensor.sizes) {
    if (size < 0) return std::nullopt;
  }
  if (*storage_offset < 0 || element_count(tensor.sizes) != *numel) return std::nullopt;
  tensor.storage_offset = *storage_offset;
  tensor.numel = *numel;

  if (*dtype >= kScalarTypeIndexLimit) return std::nullopt;
  tensor.scalar_type = *dtype;
  if (*has_device != 0) {
    if (*device_type < 0 || *device_type >= kDeviceTypeLimit) return std::nullopt;
    tensor.device_type = *device_type;
    tensor.device_index = *device_index;
  }
  return tensor;
}

}  // namespace tprof::symbolizer
