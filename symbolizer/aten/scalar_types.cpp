#include "symbolizer/aten/scalar_types.h"

#include <array>

namespace tprof::symbolizer {

namespace {

struct ScalarTypeInfo {
  std::string_view name;
  uint32_t itemsize;
};

// Read out of torch 2.6's caffe2::TypeMeta::typeMetaDatas() (and 0-17 out of torch 1.13's),
// indexed by c10::ScalarType.
constexpr std::array<ScalarTypeInfo, 44> kScalarTypes = {{
    {"unsigned char", 1},            // 0 Byte
    {"signed char", 1},              // 1 Char
    {"short int", 2},                // 2 Short
    {"int", 4},                      // 3 Int
    {"long int", 8},                 // 4 Long
    {"c10::Half", 2},                // 5 Half
    {"float", 4},                    // 6 Float
    {"double", 8},                   // 7 Double
    {"c10::complex<c10::Half>", 4},  // 8 ComplexHalf
    {"c10::complex<float>", 8},      // 9 ComplexFloat
    {"c10::complex<double>", 16},    // 10 ComplexDouble
    {"bool", 1},                     // 11 Bool
    {"c10::qint8", 1},               // 12 QInt8
    {"c10::quint8", 1},              // 13 QUInt8
    {"c10::qint32", 4},              // 14 QInt32
    {"c10::BFloat16", 2},            // 15 BFloat16
    {"c10::quint4x2", 1},            // 16 QUInt4x2
    {"c10::quint2x4", 1},            // 17 QUInt2x4
    {"c10::bits1x8", 1},             // 18 Bits1x8
    {"c10::bits2x4", 1},             // 19 Bits2x4
    {"c10::bits4x2", 1},             // 20 Bits4x2
    {"c10::bits8", 1},               // 21 Bits8
    {"c10::bits16", 2},              // 22 Bits16
    {"c10::Float8_e5m2", 1},         // 23 Float8_e5m2
    {"c10::Float8_e4m3fn", 1},       // 24 Float8_e4m3fn
    {"c10::Float8_e5m2fnuz", 1},     // 25 Float8_e5m2fnuz
    {"c10::Float8_e4m3fnuz", 1},     // 26 Float8_e4m3fnuz
    {"short unsigned int", 2},       // 27 UInt16
    {"unsigned int", 4},             // 28 UInt32
    {"long unsigned int", 8},        // 29 UInt64
    {"c10::dummy_uint1_7_t<1>", 1},  // 30 UInt1
    {"c10::dummy_uint1_7_t<2>", 1},  // 31 UInt2
    {"c10::dummy_uint1_7_t<3>", 1},  // 32 UInt3
    {"c10::dummy_uint1_7_t<4>", 1},  // 33 UInt4
    {"c10::dummy_uint1_7_t<5>", 1},  // 34 UInt5
    {"c10::dummy_uint1_7_t<6>", 1},  // 35 UInt6
    {"c10::dummy_uint1_7_t<7>", 1},  // 36 UInt7
    {"c10::dummy_int1_7_t<1>", 1},   // 37 Int1
    {"c10::dummy_int1_7_t<2>", 1},   // 38 Int2
    {"c10::dummy_int1_7_t<3>", 1},   // 39 Int3
    {"c10::dummy_int1_7_t<4>", 1},   // 40 Int4
    {"c10::dummy_int1_7_t<5>", 1},   // 41 Int5
    {"c10::dummy_int1_7_t<6>", 1},   // 42 Int6
    {"c10::dummy_int1_7_t<7>", 1},   // 43 Int7
}};

// c10::DeviceTypeName(type, /*lower_case=*/true) of torch 2.6, indexed by c10::DeviceType.
constexpr std::array<std::string_view, 21> kDeviceTypeNames = {
    "cpu",  "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip",
    "fpga", "maia", "xla",    "vulkan", "metal",  "xpu",   "mps",
    "meta", "hpu",  "ve",     "lazy",   "ipu",    "mtia",  "privateuseone",
};

const ScalarTypeInfo* scalar_type_info(int scalar_type) {
  if (scalar_type < 0 || static_cast<size_t>(scalar_type) >= kScalarTypes.size()) return nullptr;
  return &kScalarTypes[static_cast<size_t>(scalar_type)];
}

}  // namespace

std::string_view caffe2_type_name(int scalar_type) {
  const ScalarTypeInfo* info = scalar_type_info(scalar_type);
  return info ? info->name : std::string_view();
}

uint32_t scalar_type_itemsize(int scalar_type) {
  const ScalarTypeInfo* info = scalar_type_info(scalar_type);
  return info ? info->itemsize : 0;
}

std::string device_string(int device_type, int device_index) {
  std::string text = device_type >= 0 && static_cast<size_t>(device_type) < kDeviceTypeNames.size()
                         ? std::string(kDeviceTypeNames[static_cast<size_t>(device_type)])
                         : "device_type_" + std::to_string(device_type);
  if (device_index != -1) text += ":" + std::to_string(device_index);
  return text;
}

}  // namespace tprof::symbolizer
