// Calibration against the real libc10 of Debian's torch 1.13 and of torch 2.6 in the trixie
// root: the offsets decoded from the accessors' machine code must be the ones measured in live
// tensors (runtime-layouts.md §5; test_tensor_decoder.cpp checks them against live memory).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "symbolizer/aten/tensor_impl_layout.h"
#include "tests/support/process_harness.h"
#include "tests/support/test_environment.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;

// What calibration must find in one torch's libc10.
struct ExpectedCalibration {
  TensorImplLayout layout;        // every offset, and optional_payload_first
  std::string_view known_layout;  // how the source line names the layout it matched
  tensor_layout bpf;              // every field but `enabled`, which must be 1
};

void expect_calibration(const testing::TorchInstall& torch, const ExpectedCalibration& expected) {
  std::string why_not;
  const auto layout = calibrate_tensor_impl_layout(torch.library("libc10"), &why_not);
  ASSERT_TRUE(layout) << why_not;
  EXPECT_EQ(layout->dims, expected.layout.dims);
  EXPECT_EQ(layout->inline_sizes, expected.layout.inline_sizes);
  EXPECT_EQ(layout->inline_strides, expected.layout.inline_strides);
  EXPECT_EQ(layout->storage_offset, expected.layout.storage_offset);
  EXPECT_EQ(layout->numel, expected.layout.numel);
  EXPECT_EQ(layout->dtype, expected.layout.dtype);
  EXPECT_EQ(layout->device_type, expected.layout.device_type);
  EXPECT_EQ(layout->device_index, expected.layout.device_index);
  EXPECT_EQ(layout->device_has_value, expected.layout.device_has_value);
  EXPECT_EQ(layout->storage, expected.layout.storage);
  EXPECT_EQ(layout->storage_data, expected.layout.storage_data);
  EXPECT_EQ(layout->optional_payload_first, expected.layout.optional_payload_first);
  EXPECT_NE(layout->source.find(expected.known_layout), std::string::npos) << layout->source;
  EXPECT_NE(layout->source.find("StorageImpl::release_resources"), std::string::npos)
      << layout->source;
  EXPECT_NE(layout->undefined_tensor_symbol, 0u) << "UndefinedTensorImpl::_singleton is exported";

  const tensor_layout bpf = layout->to_bpf();
  EXPECT_EQ(bpf.enabled, 1u);
  EXPECT_EQ(bpf.window_offset, expected.bpf.window_offset);
  EXPECT_EQ(bpf.window_bytes, expected.bpf.window_bytes);
  EXPECT_EQ(bpf.storage_field, expected.bpf.storage_field);
  EXPECT_EQ(bpf.storage_data_field, expected.bpf.storage_data_field);
  EXPECT_EQ(bpf.optional_tensor_payload, expected.bpf.optional_tensor_payload);
  EXPECT_EQ(bpf.optional_tensor_flag, expected.bpf.optional_tensor_flag);
}

TEST(TensorImplLayout, CalibratesTorch113) {
  const testing::TorchInstall& torch = testing::debian_torch113();
  if (const auto missing = torch.missing("libc10")) GTEST_SKIP() << *missing;
  expect_calibration(torch, {.layout = {.dims = 72,
                                        .inline_sizes = 80,
                                        .inline_strides = 120,
                                        .storage_offset = 160,
                                        .numel = 168,
                                        .dtype = 176,
                                        .device_type = 179,
                                        .device_index = 180,
                                        .device_has_value = 178,
                                        .storage = 24,
                                        .storage_data = 24,
                                        .optional_payload_first = false},
                             .known_layout = "matches the torch 1.13-2.1",
                             // 72..181 (device_opt_'s end), rounded up to 8
                             .bpf = {.window_offset = 72,
                                     .window_bytes = 112,
                                     .storage_field = 24,
                                     .storage_data_field = 24,
                                     .optional_tensor_payload = 8,
                                     .optional_tensor_flag = 0}});
}

TEST(TensorImplLayout, CalibratesTorch26) {
  const testing::TorchInstall& torch = testing::trixie_torch26();
  if (const auto missing = torch.missing("libc10")) GTEST_SKIP() << *missing;
  expect_calibration(torch, {.layout = {.dims = 64,
                                        .inline_sizes = 72,
                                        .inline_strides = 112,
                                        .storage_offset = 152,
                                        .numel = 160,
                                        .dtype = 168,
                                        .device_type = 170,
                                        .device_index = 171,
                                        .device_has_value = 172,
                                        .storage = 16,
                                        .storage_data = 16,
                                        .optional_payload_first = true},
                             .known_layout = "matches the torch 2.3+",
                             // 64..173, rounded up to 8
                             .bpf = {.window_offset = 64,
                                     .window_bytes = 112,
                                     .storage_field = 16,
                                     .storage_data_field = 16,
                                     .optional_tensor_payload = 0,
                                     .optional_tensor_flag = 8}});
}

TEST(TensorImplLayout, CalibratesTorch214) {
  // GCC 16's build; PyObjectSlot is one word now, so sizes_and_strides_ moved up by 8 again.
  const testing::TorchInstall& torch = testing::sid_torch214();
  if (const auto missing = torch.missing("libc10")) GTEST_SKIP() << *missing;
  expect_calibration(torch, {.layout = {.dims = 56,
                                        .inline_sizes = 64,
                                        .inline_strides = 104,
                                        .storage_offset = 144,
                                        .numel = 152,
                                        .dtype = 160,
                                        .device_type = 162,
                                        .device_index = 163,
                                        .device_has_value = 164,
                                        .storage = 16,
                                        .storage_data = 16,
                                        .optional_payload_first = true},
                             .known_layout = "matches the torch 2.14",
                             // 56..165, rounded up to 8
                             .bpf = {.window_offset = 56,
                                     .window_bytes = 112,
                                     .storage_field = 16,
                                     .storage_data_field = 16,
                                     .optional_tensor_payload = 0,
                                     .optional_tensor_flag = 8}});
}

TEST(TensorImplLayout, RefusesALibraryWithoutTheAccessors) {
  // The test binary is an ELF that exports none of TensorImpl's accessors.
  const std::string not_libc10 = fs::read_symlink("/proc/self/exe");
  std::string why_not;
  EXPECT_FALSE(calibrate_tensor_impl_layout(not_libc10, &why_not));
  EXPECT_NE(why_not.find("TensorImpl::"), std::string::npos) << why_not;
  EXPECT_NE(why_not.find("is not exported"), std::string::npos) << why_not;
}

TEST(TensorImplLayout, RefusesAMissingFile) {
  std::string why_not;
  EXPECT_FALSE(calibrate_tensor_impl_layout("/nonexistent/libc10.so", &why_not));
  EXPECT_NE(why_not.find("/nonexistent/libc10.so"), std::string::npos) << why_not;
}

// A stand-in libc10 whose accessors are written out in assembly, the way GCC compiles the real
// ones (minus the custom-policy and Python-dispatch branches): calibration must accept any
// layout that is a known one moved as a whole, and refuse one that breaks its internal order.
struct FakeLayout {
  uint32_t storage = 24;
  uint32_t dims = 72;
  uint32_t strides_after_sizes = 40;
  bool optional_payload_first = false;
};

std::string fake_libc10_assembly(const FakeLayout& fake) {
  const uint32_t sizes = fake.dims + 8;
  const uint32_t strides = sizes + fake.strides_after_sizes;
  const uint32_t storage_offset = strides + 40;
  const uint32_t numel = storage_offset + 8;
  const uint32_t device_opt = numel + 10;
  const uint32_t device = fake.optional_payload_first ? device_opt : device_opt + 1;
  const uint32_t has_value = fake.optional_payload_first ? device_opt + 2 : device_opt;
  auto function = [](const std::string& name, const std::string& body) {
    return ".globl " + name + "\n.type " + name + ", @function\n" + name + ":\n" + body + "\n";
  };
  auto at = [](uint32_t offset) { return std::to_string(offset) + "(%rdi)"; };
  return ".text\n" +
         function("_ZNK3c1010TensorImpl10dim_customEv", "mov " + at(fake.dims) + ", %rax\nret") +
         function("_ZNK3c1010TensorImpl12sizes_customEv",
                  "mov " + at(fake.dims) + ", %rdx\ncmp $5, %rdx\nja 1f\nlea " + at(sizes) +
                      ", %rax\nret\n1: mov " + at(sizes) + ", %rax\nret") +
         function("_ZNK3c1010TensorImpl14strides_customEv",
                  "mov " + at(fake.dims) + ", %rdx\nlea " + at(strides) + ", %rax\nret") +
         function("_ZNK3c1010TensorImpl21storage_offset_customEv",
                  "mov " + at(storage_offset) + ", %rax\nret") +
         function("_ZNK3c1010TensorImpl12numel_customEv", "mov " + at(numel) + ", %rax\nret") +
         function("_ZNK3c1010TensorImpl13device_customEv", "cmpb $0, " + at(has_value) +
                                                               "\nje 1f\nmovzwl " + at(device) +
                                                               ", %eax\nret\n1: ud2") +
         function("_ZNK3c1010TensorImpl11has_storageEv",
                  "cmpq $0, " + at(fake.storage) + "\nsetne %al\nret") +
         // StorageImpl::release_resources: DataPtr::clear() zeroes the context, then the data.
         "storage_impl_release_resources:\nmovq $0, " + at(fake.storage + 16) + "\nmovq $0, " +
         at(fake.storage) + "\nret\n" +
         ".section .data.rel.ro,\"aw\"\n.globl _ZTVN3c1011StorageImplE\n"
         ".type _ZTVN3c1011StorageImplE, @object\n.size _ZTVN3c1011StorageImplE, 40\n"
         "_ZTVN3c1011StorageImplE:\n.quad 0, 0, 0, 0, storage_impl_release_resources\n";
}

class FakeLibc10 {
 public:
  explicit FakeLibc10(const FakeLayout& fake) {
    const fs::path source = directory_.path() / "libc10.s";
    std::ofstream(source) << fake_libc10_assembly(fake);
    const auto built =
        test::run_command({"cc", "-shared", "-nostdlib", "-o", path_.string(), source.string()},
                          std::chrono::seconds(60));
    if (!built.status || !built.status->succeeded()) {
      testing::fail_harness("cannot assemble a stand-in libc10 with cc");
    }
  }
  const fs::path& path() const { return path_; }

 private:
  test::ScratchDirectory directory_;
  fs::path path_ = directory_.path() / "libc10.so";
};

TEST(TensorImplLayout, AcceptsAKnownLayoutMovedAsAWhole) {
  const FakeLibc10 library({.storage = 40, .dims = 88});
  std::string why_not;
  const auto layout = calibrate_tensor_impl_layout(library.path(), &why_not);
  ASSERT_TRUE(layout) << why_not;
  EXPECT_EQ(layout->dims, 88u);
  EXPECT_EQ(layout->inline_strides, 136u);
  EXPECT_EQ(layout->device_has_value, 194u);
  EXPECT_EQ(layout->device_type, 195u);
  EXPECT_EQ(layout->storage, 40u);
  EXPECT_EQ(layout->storage_data, 40u);
  EXPECT_NE(layout->source.find("torch 1.13-2.1 (3-word intrusive_ptr_target, c10::optional) "
                                "layout shifted by +16 bytes"),
            std::string::npos)
      << layout->source;
  EXPECT_NE(layout->source.find("StorageImpl::release_resources"), std::string::npos)
      << layout->source;
}

TEST(TensorImplLayout, RecognizesTheTorch22Layout) {
  const FakeLibc10 library({.optional_payload_first = true});
  std::string why_not;
  const auto layout = calibrate_tensor_impl_layout(library.path(), &why_not);
  ASSERT_TRUE(layout) << why_not;
  EXPECT_TRUE(layout->optional_payload_first);
  EXPECT_EQ(layout->device_type, 178u);
  EXPECT_EQ(layout->device_has_value, 180u);
  EXPECT_NE(layout->source.find("matches the torch 2.2"), std::string::npos) << layout->source;
}

TEST(TensorImplLayout, RefusesInlineArraysOfAnotherSize) {
  const FakeLibc10 library({.strides_after_sizes = 48});
  std::string why_not;
  EXPECT_FALSE(calibrate_tensor_impl_layout(library.path(), &why_not));
  EXPECT_NE(why_not.find("inline strides"), std::string::npos) << why_not;
}

TEST(TensorImplLayout, UsesALayoutNeverSeenBeforeAsItsAccessorsGiveIt) {
  // storage_ where 2.3+ has it, sizes_and_strides_ where 1.13 has it: no known layout, moved or
  // not, but consistent in itself. The accessors are the authority; the first tensors decoded
  // are its trial (ArgumentDecoder's layout_rejection).
  const FakeLibc10 library({.storage = 16, .dims = 72, .optional_payload_first = true});
  std::string why_not;
  const auto layout = calibrate_tensor_impl_layout(library.path(), &why_not);
  ASSERT_TRUE(layout) << why_not;
  EXPECT_EQ(layout->storage, 16u);
  EXPECT_EQ(layout->dims, 72u);
  EXPECT_NE(layout->source.find("a layout not seen before (storage_ at 16, sizes_and_strides_ at 72"),
            std::string::npos)
      << layout->source;
}

}  // namespace
}  // namespace tprof::symbolizer
