// Which ops a session probes: --ops, --skip-ops, --no-view-ops.
#include "userspace/session/op_selection.h"

#include <gtest/gtest.h>

#include "userspace/cli/error.h"
#include "userspace/loader/exit_probes.h"

namespace tprof {
namespace {

TEST(OpSelection, WithoutOptionsEveryOpIsProbed) {
  const OpSelection all;
  EXPECT_TRUE(all.selects_all());
  EXPECT_TRUE(all.probes("aten::view"));
  EXPECT_EQ(all.describe(), "");
}

TEST(OpSelection, NoViewOpsLeavesOutViewsAndMetadataNotCopies) {
  const OpSelection selection("", "", true);
  for (const char* view : {"aten::view", "aten::t", "aten::transpose", "aten::as_strided", "aten::size", "aten::detach"})
    EXPECT_FALSE(selection.probes(view)) << view;
  for (const char* op : {"aten::addmm", "aten::copy_", "aten::contiguous", "aten::clone", "aten::view_copy"})
    EXPECT_TRUE(selection.probes(op)) << op;
  EXPECT_EQ(selection.describe(), "--no-view-ops");
}

TEST(OpSelection, OpsAndSkipOpsAreSearchedInTheName) {
  const OpSelection selection("aten::(add|mul)", "_$", false);
  EXPECT_TRUE(selection.probes("aten::addmm"));
  EXPECT_TRUE(selection.probes("aten::mul"));
  EXPECT_FALSE(selection.probes("aten::mul_")) << "--skip-ops wins";
  EXPECT_FALSE(selection.probes("aten::conv2d"));
  EXPECT_EQ(selection.describe(), "--ops 'aten::(add|mul)', --skip-ops '_$'");
}

TEST(OpSelection, ABadExpressionIsOneLineError) {
  EXPECT_THROW(OpSelection("(", "", false), Error);
  EXPECT_THROW(OpSelection("", "a[", false), Error);
}

// A `ret` two functions share is probed while either of them is.
TEST(OpSelection, ASharedReturnStaysWhileOneOfItsFunctionsIsProbed) {
  const ReturnSites returns{.offsets = {0x10, 0x20, 0x20, 0x30}, .functions = {0, 0, 1, 1}};
  EXPECT_EQ(probed_return_offsets(returns, [](uint32_t function) { return function == 0; }),
            (std::vector<uint64_t>{0x10, 0x20}));
  EXPECT_EQ(probed_return_offsets(returns, [](uint32_t function) { return function == 1; }),
            (std::vector<uint64_t>{0x20, 0x30}));
  EXPECT_EQ(probed_return_offsets(returns, [](uint32_t) { return true; }), (std::vector<uint64_t>{0x10, 0x20, 0x30}));
}

TEST(OpSelection, CalledOpsKeepsTheSelectedOnesTheTargetCalledAndTheirSites) {
  // Ops 0..3 at sites 0x100..0x400; --ops left op 1 out; the target called ops 1, 2 and 3.
  const SelectedOps selected{.sites = {"libtorch_cpu.so", {0x100, 0x300, 0x400}, {0, 2, 3}},
                             .probed = {true, false, true, true},
                             .left_out = 1};
  const SelectedOps called = called_ops(selected, {false, true, true, true});
  EXPECT_EQ(called.probed, (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(called.left_out, 2u);
  EXPECT_EQ(called.sites.binary_path, "libtorch_cpu.so");
  EXPECT_EQ(called.sites.offsets, (std::vector<unsigned long>{0x300, 0x400}));
  EXPECT_EQ(called.sites.cookies, (std::vector<uint64_t>{2, 3}));
  EXPECT_TRUE(called.probes(7)) << "an op id past the plan's (a CUDA API call) stays probed";
  EXPECT_TRUE(called_ops(selected, {}).sites.offsets.empty()) << "nothing called yet";
}

}  // namespace
}  // namespace tprof
