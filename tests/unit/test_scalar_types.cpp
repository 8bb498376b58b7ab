// The dtype and device names against torch itself: a torch process (Debian's 1.13, and 2.6 in
// the trixie root) lists caffe2::TypeMeta's name and itemsize for every ScalarType, and
// c10::DeviceTypeName for every DeviceType, straight from its libc10.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "symbolizer/aten/scalar_types.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

using nlohmann::json;

// argv[1]: how many DeviceTypes to name (DeviceTypeName aborts the process on an unknown one).
// TypeMeta's table is indexed by ScalarType and ends, for ATen dtypes, at Undefined's entry.
// Each TypeMetaData is 72 bytes with its name (a string_view) at 56: c10::string_view
// {data, size} in 1.13, std::string_view {size, data} in 2.x.
constexpr std::string_view kNamesScript = R"PY(
device_type_count = int(sys.argv[1])
type_meta_datas = c10._ZN6caffe28TypeMeta13typeMetaDatasEv
type_meta_datas.restype = ctypes.c_void_p
base = type_meta_datas()
for index in range(64):
    record = base + 72 * index
    first, second = word(record + 56), word(record + 64)
    data, size = (second, first) if first < 4096 else (first, second)
    name = ctypes.string_at(data, size).decode()
    if name == "nullptr (uninitialized)":
        break
    print(json.dumps({"scalar_type": index, "itemsize": word(record), "name": name}), flush=True)
device_type_name = c10._ZN3c1014DeviceTypeNameB5cxx11ENS_10DeviceTypeEb
device_type_name.restype = None
device_type_name.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_bool]
for device_type in range(device_type_count):
    result = ctypes.create_string_buffer(32)  # the returned std::string (sret)
    device_type_name(result, device_type, True)
    name = ctypes.string_at(word(ctypes.addressof(result)), word(ctypes.addressof(result) + 8))
    print(json.dumps({"device_type": device_type, "name": name.decode()}), flush=True)
)PY";

struct TorchUnderTest {
  testing::TorchInstall torch;
  int scalar_types;  // ATen dtypes (ScalarType::NumOptions)
  int device_types;  // DeviceTypes (COMPILE_TIME_MAX_DEVICE_TYPES)
  // DeviceTypes this torch names differently from the 2.x names device_string uses.
  std::map<int, std::string> other_device_names;
};

void PrintTo(const TorchUnderTest& under_test, std::ostream* out) {
  testing::PrintTo(under_test.torch, out);
}

std::vector<TorchUnderTest> torches() {
  return {
      {testing::debian_torch113(), 18, 20, {{8, "ort"}, {19, "privateuseone"}}},
      {testing::trixie_torch26(), 44, 21, {}},
  };
}

class ScalarTypesLive : public ::testing::TestWithParam<TorchUnderTest> {};

TEST_P(ScalarTypesLive, NamesMatchTorch) {
  const TorchUnderTest& under_test = GetParam();
  if (const auto missing = under_test.torch.missing("libc10")) GTEST_SKIP() << *missing;
  const testing::TorchScriptRun run = testing::run_with_libc10(
      under_test.torch, kNamesScript, {std::to_string(under_test.device_types)});
  ASSERT_TRUE(run.failure.empty()) << "the script failed: " << run.failure;

  int scalar_types = 0;
  int device_types = 0;
  for (const json& entry : run.objects) {
    if (entry.contains("scalar_type")) {
      const int scalar_type = entry["scalar_type"];
      SCOPED_TRACE("ScalarType " + std::to_string(scalar_type));
      EXPECT_EQ(caffe2_type_name(scalar_type), entry["name"].get<std::string>());
      EXPECT_EQ(scalar_type_itemsize(scalar_type), entry["itemsize"].get<uint32_t>());
      ++scalar_types;
    } else {
      const int device_type = entry["device_type"];
      SCOPED_TRACE("DeviceType " + std::to_string(device_type));
      const auto other = under_test.other_device_names.find(device_type);
      if (other != under_test.other_device_names.end()) {
        EXPECT_EQ(other->second, entry["name"].get<std::string>());
      } else {
        EXPECT_EQ(device_string(device_type, -1), entry["name"].get<std::string>());
      }
      ++device_types;
    }
  }
  EXPECT_EQ(scalar_types, under_test.scalar_types);
  EXPECT_EQ(device_types, under_test.device_types);
}

INSTANTIATE_TEST_SUITE_P(Torches, ScalarTypesLive, ::testing::ValuesIn(torches()),
                         [](const auto& info) { return info.param.torch.name; });

TEST(ScalarTypes, DeviceStrings) {
  EXPECT_EQ(device_string(0, -1), "cpu");
  EXPECT_EQ(device_string(1, 0), "cuda:0");
  EXPECT_EQ(device_string(14, -1), "meta");
  EXPECT_EQ(device_string(25, 2), "device_type_25:2");
}

// Past the ATen dtypes an index means something else in each version.
TEST(ScalarTypes, UnknownIndexesHaveNoName) {
  EXPECT_EQ(caffe2_type_name(-1), "");
  EXPECT_EQ(caffe2_type_name(44), "");
  EXPECT_EQ(scalar_type_itemsize(44), 0u);
}

}  // namespace
}  // namespace tprof::symbolizer
