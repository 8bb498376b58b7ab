// The kernel gate in front of uprobe_multi: a kernel before 6.6 must get a clear refusal, not
// an EINVAL from deep inside libbpf.
#include <gtest/gtest.h>

#include "userspace/loader/uprobe_multi.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/process_harness.h"
#include "tests/support/torch_libraries.h"

namespace tprof {
namespace {

TEST(UprobeMultiKernelGate, AcceptsLinux66AndNewer) {
  EXPECT_TRUE(kernel_release_has_uprobe_multi("6.6.0"));
  EXPECT_TRUE(kernel_release_has_uprobe_multi("6.18.44-fc-v769"));
  EXPECT_TRUE(kernel_release_has_uprobe_multi("7.0.1"));
}

TEST(UprobeMultiKernelGate, RefusesOlderOrUnreadableReleases) {
  EXPECT_FALSE(kernel_release_has_uprobe_multi("6.5.13-generic"));
  EXPECT_FALSE(kernel_release_has_uprobe_multi("6.1.0-27-amd64"));  // Debian bookworm's own kernel
  EXPECT_FALSE(kernel_release_has_uprobe_multi("5.15.0"));
  EXPECT_FALSE(kernel_release_has_uprobe_multi("garbage"));
}

TEST(UprobePlacement, StepsOverALeadingEndbr64Only) {
  test::ScratchDirectory scratch;
  const std::string path = scratch.path() / "code.bin";
  // 0: endbr64; push %rbp | 5: push %rbp | 6: endbr64 cut short by the end of the file
  std::ofstream(path, std::ios::binary) << std::string("\xf3\x0f\x1e\xfa\x55\x55\xf3\x0f", 8);
  EXPECT_EQ(past_leading_endbr64(path, {0, 5, 6, 100}), (std::vector<unsigned long>{4, 5, 6, 100}));
  EXPECT_EQ(past_leading_endbr64(scratch.path() / "missing", {0}), (std::vector<unsigned long>{0}));
}

TEST(UprobePlacement, Torch26OpsBeginWithEndbr64) {
  // Every function of a CET build does; torch 1.13's do not.
  const testing::TorchInstall& torch = testing::trixie_torch26();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  // at::_ops::add_Tensor::call (nm -D): endbr64; push %rbp.
  EXPECT_EQ(past_leading_endbr64(torch.library("libtorch_cpu"), {0x2bcd510}), (std::vector<unsigned long>{0x2bcd514}));
}

}  // namespace
}  // namespace tprof
