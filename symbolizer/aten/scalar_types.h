// How PyTorch names dtypes and devices in what it writes, for the values a TensorImpl holds:
// data_type_'s TypeMeta index (== c10::ScalarType for ATen dtypes) and device_opt_'s
// DeviceType and DeviceIndex.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tprof::symbolizer {

// caffe2::TypeMeta::name() of a ScalarType, the string torch's profiler writes as "Input type"
// and Execution Trace as "Tensor(<name>)": "float", "long int", "c10::Half"... The numbering is
// torch 2.6's (0-17 are the same since 1.x; 18-43 were appended later). Empty for indexes past
// that: ScalarType::Undefined (18 in 1.13, 44 in 2.6) and newer dtypes.
std::string_view caffe2_type_name(int scalar_type);

// Bytes per element (TypeMeta::itemsize(), what Tensor.element_size() returns; 1 for the
// sub-byte types); 0 where caffe2_type_name is empty.
uint32_t scalar_type_itemsize(int scalar_type);

// "cpu", "cuda:0": c10::DeviceTypeName (lower case), then ":index" unless the index is -1.
// Names follow torch 2.x, where 8 is "maia" and 19 "mtia"; torch 1.13 called 8 "ort" and had
// PrivateUse1 at 19. Types without a name come out as "device_type_<N>".
std::string device_string(int device_type, int device_index);

}  // namespace tprof::symbolizer
