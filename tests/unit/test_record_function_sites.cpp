// record_function probe sites of the real libtorch_cpu of Debian's torch 1.13 and of torch 2.6
// in the trixie root. The expected kernels are this Debian build's, checked live with gdb: a
// breakpoint at load bias + the kernel fired once per `with record_function(name):` block,
// with the block's name at *(char**)$rsi, followed by RecordFunction(RecordScope) with
// esi = 7 called from inside the kernel.
#include "symbolizer/autograd/record_function_sites.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "symbolizer/binary/elf_file.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

// File offsets in one torch's libtorch_cpu.
struct ExpectedSites {
  // record_function_enter_legacy, the static kernel of
  // torch.ops.profiler._record_function_enter, and the exported record_function_enter_new.
  uint64_t legacy_kernel;
  uint64_t record_function_enter_new;
  // rpc's UserRRef::toHere also constructs a USER_SCOPE RecordFunction; it is no kernel. Nor
  // is a static function among ProcessGroupGloo's code (c10d's async-work profiling), which
  // checks that its RecordFunction is active before handing anything on.
  uint64_t user_rref_to_here;
  uint64_t gloo_async_work_profiling;
  uint64_t user_scope_constructor;
  uint64_t end;
};

bool contains(const std::vector<uint64_t>& offsets, uint64_t offset) {
  return std::find(offsets.begin(), offsets.end(), offset) != offsets.end();
}

void expect_sites(const testing::TorchInstall& torch, const ExpectedSites& expected) {
  const ElfFile elf(torch.library("libtorch_cpu"));
  const RecordFunctionSites sites = find_record_function_sites(LibraryIndex(elf));
  SCOPED_TRACE(sites.source);

  EXPECT_EQ(sites.enter_functions, (std::vector<uint64_t>{expected.legacy_kernel,
                                                          expected.record_function_enter_new}));
  EXPECT_FALSE(contains(sites.enter_functions, expected.user_rref_to_here));
  EXPECT_NE(sites.source.find("UserRRef6toHere"), std::string::npos);
  EXPECT_FALSE(contains(sites.enter_functions, expected.gloo_async_work_profiling));

  EXPECT_EQ(sites.user_scope_constructor, expected.user_scope_constructor);
  EXPECT_EQ(sites.end, expected.end);
}

TEST(RecordFunctionSites, Torch113) {
  const testing::TorchInstall& torch = testing::debian_torch113();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  // 1.13's record_function.__enter__ calls the legacy kernel (gdb: hit once per block, $rsi ->
  // the name); it does not call record_function_enter_new, a kernel of the same kind.
  expect_sites(torch, {.legacy_kernel = 0x3b60060,
                       .record_function_enter_new = 0x3b601d0,
                       .user_rref_to_here = 0x4512920,
                       .gloo_async_work_profiling = 0x4473300,
                       .user_scope_constructor = 0xf2a640,
                       // end()+4: `je` after `cmpb $0x0,0x68(%rdi)`
                       .end = 0xf276a4});
}

TEST(RecordFunctionSites, Torch26) {
  const testing::TorchInstall& torch = testing::trixie_torch26();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  // 2.6's record_function.__enter__ calls record_function_enter_new (gdb: hit once per block,
  // $rsi -> the name); record_function_enter_legacy is still registered (gdb: hit by a direct
  // torch.ops.profiler._record_function_enter("legacy_direct") call).
  expect_sites(torch, {.legacy_kernel = 0x611a270,
                       .record_function_enter_new = 0x611a330,
                       .user_rref_to_here = 0x6cc78d0,
                       .gloo_async_work_profiling = 0x6be7ac0,
                       .user_scope_constructor = 0x1ccb620,
                       // end()+8: `je` after endbr64 and `cmpb $0x0,0x68(%rdi)`
                       .end = 0x1cc8208});
}

}  // namespace
}  // namespace tprof::symbolizer
