// Turns the TensorImpl bytes BPF copied (bpf/op_arguments.h: tensor_copy) into shape, strides,
// dtype and device, with the layout calibrate_tensor_impl_layout found.
#pragma once

#include <boost/container/static_vector.hpp>

#include <cstdint>
#include <optional>

#include "bpf/op_arguments.h"
#include "symbolizer/aten/tensor_impl_layout.h"

namespace tprof::symbolizer {

struct DecodedTensor {
  uint64_t impl = 0;          // TensorImpl*
  uint64_t storage_data = 0;  // StorageImpl's data pointer (0: none or unreadable)
  // False for c10::UndefinedTensorImpl (an undefined at::Tensor): the one TensorImpl built
  // without a device, and it holds no elements. Every tensor with elements has the device of
  // its storage, so "device_opt_ empty and numel_ 0" singles it out; a device-less tensor
  // with elements still decodes, with device -1. Nothing but impl and storage_data is set then.
  bool defined = true;
  boost::container::static_vector<int64_t, OUT_OF_LINE_DIMS_MAX> sizes, strides;  // inline: no heap
  int64_t storage_offset = 0, numel = 0;
  int scalar_type = -1;  // c10::ScalarType index (data_type_)
  int device_type = -1, device_index = -1;
};

// `out_of_line`: the 2 * OUT_OF_LINE_DIMS_MAX words BPF copied for this tensor (its sizes, then
// its strides, straight from the heap array: strides start at word `dims`), or nullptr when it
// copied none. nullopt when the bytes fail validity checks: dims > 64; more than 5 dims without
// out-of-line words, or more than OUT_OF_LINE_DIMS_MAX; a negative size or storage offset, or
// numel_ not the product of the sizes (which also turns away symbolic and nested shapes, whose
// real sizes live elsewhere); a dtype index >= 64; a device type outside 0..31.
std::optional<DecodedTensor> decode_tensor(const tensor_copy& copy, const int64_t* out_of_line,
                                           const TensorImplLayout& layout);

}  // namespace tprof::symbolizer
