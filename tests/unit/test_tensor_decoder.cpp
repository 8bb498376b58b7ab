// Decoding against live tensors: a real torch process (Debian's 1.13, and 2.6 in the trixie
// root) creates tensors and dumps the memory of each TensorImpl, as BPF would read it, next to
// what torch itself says about the tensor. The test calibrates the layout from that torch's
// libc10, plays BPF's part on the dumped bytes (window, storage_ -> StorageImpl -> data, the
// out-of-line array) and checks the decode against torch's own answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "symbolizer/aten/scalar_types.h"
#include "symbolizer/aten/tensor_decoder.h"
#include "symbolizer/aten/tensor_impl_layout.h"
#include "tests/support/int_lists.h"
#include "tests/support/test_environment.h"
#include "tests/support/torch_libraries.h"
#include "tests/support/tensor_layouts.h"

namespace tprof::symbolizer {
namespace {

using nlohmann::json;

// argv[1]: where the out-of-line array's pointer sits (the first inline size). Prints one JSON
// object per tensor. `_cdata` is the TensorImpl*; `plain_tensor_impl` checks that against
// TensorImpl's vtable exported from libc10.
constexpr std::string_view kDumpScript = R"PY(
pointer_slot = int(sys.argv[1])
def address_of(symbol): return ctypes.addressof(ctypes.c_char.in_dll(c10, symbol))
tensor_impl_vptr = address_of("_ZTVN3c1010TensorImplE") + 16
def storage_of(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()._storage
def dump(name, impl, t=None):
    report = {"name": name, "impl": impl, "impl_bytes": ctypes.string_at(impl, 192).hex()}
    if t is not None:
        storage = storage_of(t)
        report.update(shape=list(t.shape), stride=list(t.stride()),
                      storage_offset=t.storage_offset(), numel=t.numel(), dtype=str(t.dtype),
                      element_size=t.element_size(), device=str(t.device),
                      plain_tensor_impl=word(impl) == tensor_impl_vptr,
                      storage_impl=storage._cdata,
                      storage_impl_bytes=ctypes.string_at(storage._cdata, 64).hex(),
                      storage_data=storage.data_ptr())
        if 5 < t.dim() <= 8:
            report["out_of_line"] = ctypes.string_at(word(impl + pointer_slot), 16 * t.dim()).hex()
    print(json.dumps(report), flush=True)
tensors = {
    "five_dims_view": torch.empty((2, 3, 5, 7, 11), dtype=torch.float16)[:, 1:],
    "zero_dims": torch.tensor(3, dtype=torch.int64),
    "six_dims_transposed": torch.empty((2, 3, 1, 2, 1, 3)).transpose(0, 5),
    "seven_dims_with_offset": torch.empty((2,) * 6 + (3,), dtype=torch.float64)[..., 1:],
    "no_elements": torch.empty((0, 4), dtype=torch.bool),
    "meta_device": torch.empty((3, 4), dtype=torch.bfloat16, device="meta"),
    "nine_dims": torch.empty((1,) * 8 + (2,)),
}
for name, t in tensors.items():
    dump(name, t._cdata, t)
dump("undefined", address_of("_ZN3c1019UndefinedTensorImpl10_singletonE"))
)PY";

// c10::ScalarType of the dtypes the script uses (c10/core/ScalarType.h), with the name
// caffe2::TypeMeta gives each.
struct DtypeFacts {
  int scalar_type;
  std::string_view type_name;
};
const std::map<std::string, DtypeFacts, std::less<>> kDtypes = {
    {"torch.float16", {5, "c10::Half"}}, {"torch.int64", {4, "long int"}},
    {"torch.float32", {6, "float"}},     {"torch.float64", {7, "double"}},
    {"torch.bool", {11, "bool"}},        {"torch.bfloat16", {15, "c10::BFloat16"}},
};

std::string bytes_from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t at = 0; at + 1 < hex.size(); at += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(at, 2), nullptr, 16)));
  }
  return bytes;
}

uint64_t word_at(const std::string& bytes, uint32_t offset) {
  uint64_t value = 0;
  if (offset + sizeof(value) > bytes.size()) testing::fail_harness("dump too short");
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

// What BPF copies for this TensorImpl (bpf/argument_reader.bpf.h, copy_tensor), built from the
// dumped memory, with the pointer chases checked against the addresses torch reported.
struct BpfView {
  tensor_copy copy{};
  std::array<int64_t, 2 * OUT_OF_LINE_DIMS_MAX> out_of_line{};
  bool has_out_of_line = false;
};

BpfView play_bpf(const json& report, const TensorImplLayout& layout) {
  BpfView view;
  const std::string impl = bytes_from_hex(report["impl_bytes"]);
  const tensor_layout bpf = layout.to_bpf();
  view.copy.impl = report["impl"];
  std::memcpy(view.copy.window, impl.data() + bpf.window_offset, bpf.window_bytes);
  const uint64_t storage = word_at(impl, bpf.storage_field);
  if (storage != 0) {
    EXPECT_EQ(storage, report.value("storage_impl", uint64_t{0})) << "storage_ is elsewhere";
    const std::string storage_impl = bytes_from_hex(report["storage_impl_bytes"]);
    view.copy.storage_data = word_at(storage_impl, bpf.storage_data_field);
  }
  if (report.contains("out_of_line")) {
    const std::string heap = bytes_from_hex(report["out_of_line"]);
    std::memcpy(view.out_of_line.data(), heap.data(),
                std::min(heap.size(), sizeof(view.out_of_line)));
    view.has_out_of_line = true;
  }
  return view;
}

class TensorDecoderLive : public ::testing::TestWithParam<testing::TorchInstall> {};

TEST_P(TensorDecoderLive, DecodesWhatTorchReports) {
  const testing::TorchInstall& torch = GetParam();
  if (const auto missing = torch.missing("libc10")) GTEST_SKIP() << *missing;
  std::string why_not;
  const auto layout = calibrate_tensor_impl_layout(torch.library("libc10"), &why_not);
  ASSERT_TRUE(layout) << why_not;

  const testing::TorchScriptRun run =
      testing::run_with_libc10(torch, kDumpScript, {std::to_string(layout->inline_sizes)});
  ASSERT_TRUE(run.failure.empty()) << "the dump script failed: " << run.failure;

  std::map<std::string, json> reports;
  for (const json& report : run.objects) reports[report["name"]] = report;
  ASSERT_EQ(reports.size(), 8u) << "the script reported " << reports.size() << " tensors";

  for (const auto& [name, report] : reports) {
    SCOPED_TRACE(name);
    const BpfView bpf = play_bpf(report, *layout);
    const auto decoded =
        decode_tensor(bpf.copy, bpf.has_out_of_line ? bpf.out_of_line.data() : nullptr, *layout);

    if (name == "undefined") {
      ASSERT_TRUE(decoded);
      EXPECT_FALSE(decoded->defined);
      EXPECT_EQ(decoded->storage_data, 0u);
      continue;
    }
    EXPECT_TRUE(report["plain_tensor_impl"].get<bool>()) << "_cdata is not a TensorImpl*";
    if (name == "nine_dims") {
      // BPF copies at most OUT_OF_LINE_DIMS_MAX dims: no shape rather than a wrong one.
      EXPECT_FALSE(decoded);
      continue;
    }
    ASSERT_TRUE(decoded);
    EXPECT_TRUE(decoded->defined);
    EXPECT_EQ(decoded->impl, report["impl"].get<uint64_t>());
    EXPECT_EQ(decoded->storage_data, report["storage_data"].get<uint64_t>());
    EXPECT_EQ(tprof::testing::as_vector(decoded->sizes), report["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(tprof::testing::as_vector(decoded->strides), report["stride"].get<std::vector<int64_t>>());
    EXPECT_EQ(decoded->storage_offset, report["storage_offset"].get<int64_t>());
    EXPECT_EQ(decoded->numel, report["numel"].get<int64_t>());
    const DtypeFacts& dtype = kDtypes.at(report["dtype"].get<std::string>());
    EXPECT_EQ(decoded->scalar_type, dtype.scalar_type);
    EXPECT_EQ(caffe2_type_name(decoded->scalar_type), dtype.type_name);
    EXPECT_EQ(scalar_type_itemsize(decoded->scalar_type), report["element_size"].get<uint32_t>());
    EXPECT_EQ(device_string(decoded->device_type, decoded->device_index),
              report["device"].get<std::string>());
  }
  // The cases are what they claim to be.
  EXPECT_TRUE(reports["six_dims_transposed"].contains("out_of_line"));
  EXPECT_GT(reports["seven_dims_with_offset"]["storage_offset"].get<int64_t>(), 0);
  EXPECT_GT(reports["five_dims_view"]["storage_offset"].get<int64_t>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Torches, TensorDecoderLive,
                         ::testing::Values(testing::debian_torch113(), testing::trixie_torch26(), testing::sid_torch214()),
                         [](const auto& info) { return info.param.name; });

// Hand-made windows, in torch 1.13's layout, for what live tensors cannot easily show.
// A 1-D CPU float tensor of `size` elements.
tensor_copy one_dim_copy(const TensorImplLayout& layout, int64_t size) {
  tensor_copy copy{};
  copy.impl = 0x1000;
  auto put = [&](uint32_t offset, const auto& value) {
    std::memcpy(copy.window + (offset - layout.dims), &value, sizeof(value));
  };
  put(layout.dims, uint64_t{1});
  put(layout.inline_sizes, size);
  put(layout.inline_strides, int64_t{1});
  put(layout.numel, size);
  put(layout.dtype, uint16_t{6});
  put(layout.device_has_value, uint8_t{1});
  put(layout.device_type, int8_t{1});
  put(layout.device_index, int8_t{3});
  return copy;
}

TEST(TensorDecoder, DecodesAHandMadeWindow) {
  const TensorImplLayout layout = testing::torch113_tensor_impl_layout();
  const auto decoded = decode_tensor(one_dim_copy(layout, 7), nullptr, layout);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(tprof::testing::as_vector(decoded->sizes), std::vector<int64_t>{7});
  EXPECT_EQ(device_string(decoded->device_type, decoded->device_index), "cuda:3");
}

TEST(TensorDecoder, RefusesImplausibleBytes) {
  const TensorImplLayout layout = testing::torch113_tensor_impl_layout();
  auto with = [&](uint32_t offset, const auto& value) {
    tensor_copy copy = one_dim_copy(layout, 7);
    std::memcpy(copy.window + (offset - layout.dims), &value, sizeof(value));
    return copy;
  };
  EXPECT_FALSE(decode_tensor(with(layout.numel, int64_t{8}), nullptr, layout));  // != 7
  EXPECT_FALSE(decode_tensor(with(layout.inline_sizes, int64_t{-7}), nullptr, layout));
  EXPECT_FALSE(decode_tensor(with(layout.dims, uint64_t{65}), nullptr, layout));
  EXPECT_FALSE(decode_tensor(with(layout.dims, uint64_t{6}), nullptr, layout));  // no heap copy
  EXPECT_FALSE(decode_tensor(with(layout.dtype, uint16_t{64}), nullptr, layout));
  EXPECT_FALSE(decode_tensor(with(layout.device_type, int8_t{32}), nullptr, layout));
  EXPECT_FALSE(decode_tensor(with(layout.storage_offset, int64_t{-1}), nullptr, layout));
  tensor_copy unreadable = one_dim_copy(layout, 7);
  unreadable.impl = 0;
  EXPECT_FALSE(decode_tensor(unreadable, nullptr, layout));
}

TEST(TensorDecoder, KeepsADevicelessTensorWithElementsDefined) {
  const TensorImplLayout layout = testing::torch113_tensor_impl_layout();
  tensor_copy copy = one_dim_copy(layout, 7);
  copy.window[layout.device_has_value - layout.dims] = 0;
  const auto decoded = decode_tensor(copy, nullptr, layout);
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->defined);
  EXPECT_EQ(decoded->device_type, -1);
  EXPECT_EQ(decoded->device_index, -1);
}

}  // namespace
}  // namespace tprof::symbolizer
