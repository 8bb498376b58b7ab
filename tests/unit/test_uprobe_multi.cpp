// The kernel gate in front of uprobe_multi: a kernel before 6.6 must get a clear refusal, not
// an EINVAL from deep inside libbpf.
#include <gtest/gtest.h>

#include "userspace/uprobe_multi.h"

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

}  // namespace
}  // namespace tprof
