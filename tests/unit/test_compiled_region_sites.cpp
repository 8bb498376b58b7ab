// Where dynamo names its compiled regions, in the real libtorch_python of Debian's torch 1.13
// (none: no dynamo), torch 2.6 (trixie root) and torch 2.14 (sid root). The probe goes on an
// instruction the kernel emulates where there is one before anything writes the register that
// holds the name, else on the entry; uprobe_multi.h steps past a leading endbr64 either way.
#include "symbolizer/dynamo/compiled_region_sites.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

// The `count` bytes of code at `file_offset` of `path`; "" outside executable sections.
std::string code_bytes(const std::string& path, uint64_t file_offset, size_t count) {
  const ElfFile elf(path);
  const SectionMap sections(elf);
  for (const auto& section : sections.sections())
    if (section.executable && file_offset >= section.file_offset && file_offset < section.file_offset + section.bytes.size())
      return std::string(section.bytes.substr(file_offset - section.file_offset, count));
  return "";
}

TEST(CompiledRegionSites, Torch113HasNoDynamo) {
  const testing::TorchInstall& torch = testing::debian_torch113();
  if (const auto missing = torch.missing("libtorch_python")) GTEST_SKIP() << *missing;
  EXPECT_FALSE(find_compiled_region_site(torch.library("libtorch_python")));
}

TEST(CompiledRegionSites, AFileThatCannotBeReadIsAnErrorNamingIt) {
  try {
    find_compiled_region_site("/nonexistent/libtorch_python.so");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/libtorch_python.so"), std::string::npos) << error.what();
  }
}

// 2.6: _pytorch_record_function_enter begins endbr64; push %rbp: the push, emulated.
TEST(CompiledRegionSites, Torch26NamesItInRdi) {
  const testing::TorchInstall& torch = testing::trixie_torch26();
  if (const auto missing = torch.missing("libtorch_python")) GTEST_SKIP() << *missing;
  const auto site = find_compiled_region_site(torch.library("libtorch_python"));
  ASSERT_TRUE(site);
  EXPECT_EQ(site->function, "_pytorch_record_function_enter");
  EXPECT_EQ(site->name_argument, 1u);
  EXPECT_EQ(code_bytes(torch.library("libtorch_python"), site->file_offset, 5), "\xf3\x0f\x1e\xfa\x55");
}

// 2.14: dynamo_eval_custom_code, its name in rcx. It begins endbr64; sub $0x58,%rsp and then
// moves without a push or a jump among its first eight instructions: the entry, where the
// `sub` is single-stepped (once per compiled-graph call).
TEST(CompiledRegionSites, Torch214NamesItInRcx) {
  const testing::TorchInstall& torch = testing::sid_torch214();
  if (const auto missing = torch.missing("libtorch_python")) GTEST_SKIP() << *missing;
  const auto site = find_compiled_region_site(torch.library("libtorch_python"));
  ASSERT_TRUE(site);
  EXPECT_EQ(site->function, "dynamo_eval_custom_code");
  EXPECT_EQ(site->name_argument, 4u);
  EXPECT_EQ(code_bytes(torch.library("libtorch_python"), site->file_offset, 8), "\xf3\x0f\x1e\xfa\x48\x83\xec\x58");
}

}  // namespace
}  // namespace tprof::symbolizer
