// record_function probe sites of the real libtorch_cpu of Debian's torch 1.13 and of torch 2.6
// in the trixie root. The expected kernels are this Debian build's, checked live with gdb: a
// breakpoint at load bias + the kernel fired once per `with record_function(name):` block,
// with the block's name at *(char**)$rsi, followed by RecordFunction(RecordScope) with
// esi = 7 called from inside the kernel.
#include "symbolizer/record_function_sites.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "symbolizer/elf_file.h"
#include "tests/support/test_environment.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;

const fs::path kTrixieRoot = testing::trixie_root();
const fs::path kTrixieFinishedMarker = kTrixieRoot / ".tprof-complete";
const fs::path kTrixieLibtorchCpu = kTrixieRoot / "usr/lib/x86_64-linux-gnu/libtorch_cpu.so.2.6";

bool contains(const std::vector<uint64_t>& offsets, uint64_t offset) {
  return std::find(offsets.begin(), offsets.end(), offset) != offsets.end();
}

TEST(RecordFunctionSites, Torch113) {
  if (!fs::exists(testing::debian_libtorch_cpu())) {
    GTEST_SKIP() << "SKIPPED LOUDLY: " << testing::debian_libtorch_cpu()
                 << " is missing (Debian libtorch1.13)";
  }
  const ElfFile elf(testing::debian_libtorch_cpu());
  const RecordFunctionSites sites = find_record_function_sites(elf);
  SCOPED_TRACE(sites.source);

  // record_function_enter_legacy, the static kernel of torch.ops.profiler._record_function_enter,
  // which 1.13's record_function.__enter__ calls (gdb: hit once per block, $rsi -> the name), and
  // the exported record_function_enter_new, which 1.13's Python does not call but is a kernel of
  // the same kind.
  constexpr uint64_t kLegacyKernel = 0x3b60060;
  constexpr uint64_t kRecordFunctionEnterNew = 0x3b601d0;
  EXPECT_EQ(sites.enter_functions, (std::vector<uint64_t>{kLegacyKernel, kRecordFunctionEnterNew}));
  // rpc's UserRRef::toHere also constructs a USER_SCOPE RecordFunction; it is no kernel.
  constexpr uint64_t kUserRRefToHere = 0x4512920;
  EXPECT_FALSE(contains(sites.enter_functions, kUserRRefToHere));
  EXPECT_NE(sites.source.find("UserRRef6toHere"), std::string::npos);
  // Nor is a static function among ProcessGroupGloo's code (c10d's async-work profiling), which
  // checks that its RecordFunction is active before handing anything on.
  constexpr uint64_t kGlooAsyncWorkProfiling = 0x4473300;
  EXPECT_FALSE(contains(sites.enter_functions, kGlooAsyncWorkProfiling));

  EXPECT_EQ(sites.user_scope_constructor, 0xf2a640u);
  EXPECT_EQ(sites.end, 0xf276a0u);
}

TEST(RecordFunctionSites, Torch26) {
  if (!fs::exists(kTrixieFinishedMarker) || !fs::exists(kTrixieLibtorchCpu)) {
    GTEST_SKIP() << "SKIPPED LOUDLY: no finished trixie root with torch 2.6 at " << kTrixieRoot
                 << " (scripts/make-trixie-root.sh builds it)";
  }
  const ElfFile elf(kTrixieLibtorchCpu.string());
  const RecordFunctionSites sites = find_record_function_sites(elf);
  SCOPED_TRACE(sites.source);

  // 2.6's record_function.__enter__ calls the exported record_function_enter_new (gdb: hit
  // once per block, $rsi -> the name); record_function_enter_legacy is still registered (gdb:
  // hit by a direct torch.ops.profiler._record_function_enter("legacy_direct") call).
  constexpr uint64_t kLegacyKernel = 0x611a270;
  constexpr uint64_t kRecordFunctionEnterNew = 0x611a330;
  EXPECT_EQ(sites.enter_functions, (std::vector<uint64_t>{kLegacyKernel, kRecordFunctionEnterNew}));
  constexpr uint64_t kUserRRefToHere = 0x6cc78d0;
  EXPECT_FALSE(contains(sites.enter_functions, kUserRRefToHere));
  constexpr uint64_t kGlooAsyncWorkProfiling = 0x6be7ac0;
  EXPECT_FALSE(contains(sites.enter_functions, kGlooAsyncWorkProfiling));

  EXPECT_EQ(sites.user_scope_constructor, 0x1ccb620u);
  EXPECT_EQ(sites.end, 0x1cc8200u);
}

}  // namespace
}  // namespace tprof::symbolizer
