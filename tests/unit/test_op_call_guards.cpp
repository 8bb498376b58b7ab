// The first-call guards of the real libtorch_cpu op functions (Debian's torch 1.13, torch 2.6
// in the trixie root, torch 2.14 in the sid root): found for nearly every op, one byte each,
// and set in a live torch process exactly for the ops it has called.
#include "symbolizer/aten/op_call_guards.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <iostream>
#include <set>
#include <string>

#include "symbolizer/aten/op_catalog.h"
#include "symbolizer/binary/elf_file.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

class OpCallGuardsTest : public ::testing::TestWithParam<testing::TorchInstall> {
 protected:
  void SetUp() override {
    if (const auto missing = GetParam().missing("libtorch_cpu")) GTEST_SKIP() << *missing;
    const std::string path = GetParam().library("libtorch_cpu");
    catalog_ = build_op_catalog(path);
    elf_ = std::make_unique<ElfFile>(path);
    sections_ = std::make_unique<SectionMap>(*elf_);
    std::vector<uint64_t> addresses;
    for (const OpCatalogEntry& entry : catalog_.entries) addresses.push_back(entry.site.symbol_address);
    guards_ = find_op_call_guards(*sections_, addresses);
  }

  // The guard of the op whose symbol names `unambiguous` ("add_Tensor"); 0 when not found.
  uint64_t guard_of(const std::string& op_name, const std::string& overload) const {
    for (size_t at = 0; at < catalog_.entries.size(); ++at)
      if (catalog_.entries[at].op_name == op_name && catalog_.entries[at].overload == overload) return guards_[at];
    return 0;
  }

  OpCatalog catalog_;
  std::unique_ptr<ElfFile> elf_;
  std::unique_ptr<SectionMap> sections_;
  std::vector<uint64_t> guards_;
};

TEST_P(OpCallGuardsTest, NearlyEveryOpHasAGuardOfItsOwnInWritableData) {
  size_t found = 0;
  std::set<uint64_t> distinct;
  for (const uint64_t guard : guards_) {
    if (guard == 0) continue;
    ++found;
    distinct.insert(guard);
    // A guard lives in .bss: no section stored in the file holds it, or a writable one.
    for (const SectionMap::Section& section : sections_->sections())
      if (guard >= section.address && guard < section.address + section.bytes.size()) {
        EXPECT_FALSE(section.executable) << std::hex << guard;
      }
  }
  std::cout << GetParam().name << ": guards of " << found << " of " << guards_.size() << " op functions\n";
  EXPECT_GE(found, guards_.size() * 99 / 100);
  EXPECT_EQ(distinct.size(), found) << "two ops share a guard";
}

// In a torch process, after torch.add and before any FFT: add.Tensor's guard is set, and
// fft_ifft2's and istft's are not.
TEST_P(OpCallGuardsTest, AreSetInALiveProcessForTheOpsItCalled) {
  const uint64_t add = guard_of("aten::add", "Tensor");
  const uint64_t ifft2 = guard_of("aten::fft_ifft2", "");
  const uint64_t istft = guard_of("aten::istft", "");
  ASSERT_NE(add, 0u);
  ASSERT_NE(ifft2, 0u);
  ASSERT_NE(istft, 0u);
  constexpr const char* kScript = R"(
base = None
for line in open('/proc/self/maps'):
    fields = line.split()
    if len(fields) >= 6 and fields[5].split('/')[-1].startswith('libtorch_cpu.so'):
        start, offset = int(fields[0].split('-')[0], 16), int(fields[2], 16)
        base = start - offset if base is None else min(base, start - offset)
torch.add(torch.ones(2), torch.ones(2))
guard = lambda address: ctypes.c_uint8.from_address(base + address).value
print(json.dumps({name: guard(int(address)) for name, address in zip(['add', 'ifft2', 'istft'], sys.argv[1:])}))
)";
  const testing::TorchScriptRun run = testing::run_with_libc10(
      GetParam(), kScript, {std::to_string(add), std::to_string(ifft2), std::to_string(istft)});
  ASSERT_TRUE(run.failure.empty()) << run.failure;
  ASSERT_EQ(run.objects.size(), 1u);
  EXPECT_NE(run.objects[0]["add"].get<int>(), 0);
  EXPECT_EQ(run.objects[0]["ifft2"].get<int>(), 0);
  EXPECT_EQ(run.objects[0]["istft"].get<int>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Torch, OpCallGuardsTest,
                         ::testing::Values(testing::debian_torch113(), testing::trixie_torch26(), testing::sid_torch214()),
                         [](const auto& info) { return info.param.name; });

// read_called_ops on this process: guards at the addresses of local bytes, with load address 0.
TEST(ReadCalledOps, ReadsEachGuardAndCountsOpsWithoutOneAsCalled) {
  std::array<unsigned char, 9000> bss{};  // spans two runs: a gap wider than a page
  bss[0] = 1;
  bss[8999] = 1;
  const auto at = [&](size_t index) { return reinterpret_cast<uint64_t>(&bss[index]); };
  const ProcessMemory memory(getpid());
  bool unreadable = true;
  const std::vector<bool> called = read_called_ops(memory, 0, {at(0), at(1), 0, at(8999), at(8998)}, &unreadable);
  EXPECT_FALSE(unreadable);
  EXPECT_EQ(called, (std::vector<bool>{true, false, true, true, false}));
}

TEST(ReadCalledOps, CountsEveryOpAsCalledWhenTheGuardsCannotBeRead) {
  const ProcessMemory memory(getpid());
  bool unreadable = false;
  const std::vector<bool> called = read_called_ops(memory, 0, {16, 24}, &unreadable);  // page 0 is never mapped
  EXPECT_TRUE(unreadable);
  EXPECT_EQ(called, (std::vector<bool>{true, true}));
}

}  // namespace
}  // namespace tprof::symbolizer
