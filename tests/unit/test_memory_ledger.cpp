// The ledger of the CPU allocator's live blocks (--memory): frees sized from their allocation,
// torch's running total, frees of blocks it never saw, the bound on what it keeps, and who held
// the peak.
#include "userspace/assemble/memory_ledger.h"

#include <gtest/gtest.h>

namespace tprof {
namespace {

// Two places of allocation, told apart by their operator index.
const MemoryLedger::Site kForward{nullptr, 1};
const MemoryLedger::Site kBackward{nullptr, 2};

TEST(MemoryLedger, AFreeTakesTheSizeOfItsAllocationAndTheTotalFollows) {
  MemoryLedger ledger;
  EXPECT_EQ(ledger.allocate(0x1000, 512, kForward, 10)->total_allocated, 512);
  EXPECT_EQ(ledger.allocate(0x2000, 256, kBackward, 20)->total_allocated, 768);
  const auto freed = ledger.free(0x1000);
  ASSERT_TRUE(freed);
  EXPECT_EQ(freed->bytes, -512);
  EXPECT_EQ(freed->total_allocated, 256);
  EXPECT_EQ(freed->site, kForward);
  EXPECT_EQ(ledger.peak_allocated(), 768);
  EXPECT_EQ(ledger.peak_time_ns(), 20u);
}

TEST(MemoryLedger, AFreeOfABlockNeverSeenIsLeftOutAndCounted) {
  MemoryLedger ledger;
  EXPECT_FALSE(ledger.free(0x1000));
  EXPECT_EQ(ledger.frees_of_unknown_blocks(), 1u);
  EXPECT_EQ(ledger.total_allocated(), 0);
}

TEST(MemoryLedger, PastItsBoundAnAllocationIsForgottenWithItsFree) {
  MemoryLedger ledger(2);
  EXPECT_TRUE(ledger.allocate(0x1000, 1, kForward, 1));
  EXPECT_TRUE(ledger.allocate(0x2000, 1, kForward, 2));
  EXPECT_FALSE(ledger.allocate(0x3000, 1, kForward, 3));
  EXPECT_EQ(ledger.blocks_forgotten(), 1u);
  EXPECT_FALSE(ledger.free(0x3000));
  EXPECT_EQ(ledger.total_allocated(), 2);
  EXPECT_EQ(ledger.live_blocks(), 2u);
}

TEST(MemoryLedger, AnAddressAllocatedAgainDropsTheBlockWhoseFreeWasLost) {
  MemoryLedger ledger;
  ledger.allocate(0x1000, 100, kForward, 1);
  const auto again = ledger.allocate(0x1000, 40, kBackward, 2);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->total_allocated, 40);
  EXPECT_EQ(ledger.free(0x1000)->bytes, -40);
}

TEST(MemoryLedger, ThePeaksHoldersAreTheBlocksLiveWhenItWasReachedLargestFirst) {
  MemoryLedger ledger;
  ledger.allocate(0x1000, 300, kForward, 1);
  ledger.allocate(0x2000, 700, kBackward, 2);
  ledger.allocate(0x3000, 100, kForward, 3);  // the peak: 1100
  ledger.free(0x2000);
  ledger.allocate(0x4000, 500, kBackward, 4);  // 900: below the peak
  const auto holders = ledger.peak_holders();
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders[0].site, kBackward);
  EXPECT_EQ(holders[0].bytes, 700);
  EXPECT_EQ(holders[0].blocks, 1u);
  EXPECT_EQ(holders[1].site, kForward);
  EXPECT_EQ(holders[1].bytes, 400);
  EXPECT_EQ(holders[1].blocks, 2u);
}

TEST(MemoryLedger, WhileAtItsPeakTheHoldersAreTheLiveBlocks) {
  MemoryLedger ledger;
  ledger.allocate(0x1000, 300, kForward, 1);
  ledger.free(0x1000);
  ledger.allocate(0x2000, 500, kBackward, 2);  // a new peak, not yet fallen from
  const auto holders = ledger.peak_holders();
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].site, kBackward);
  EXPECT_EQ(holders[0].bytes, 500);
}

TEST(MemoryLedger, LiveBlocksAllocatedBeforeATimeAreGroupedByWhere) {
  MemoryLedger ledger;
  ledger.allocate(0x1000, 100, kForward, 10);
  ledger.allocate(0x2000, 300, kBackward, 20);
  ledger.allocate(0x3000, 50, kForward, 30);
  ledger.allocate(0x4000, 999, kForward, 40);  // at the time: not before it
  ledger.free(0x2000);
  const auto before = ledger.live_allocated_before(40);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].site, kForward);
  EXPECT_EQ(before[0].bytes, 150);
  EXPECT_EQ(before[0].blocks, 2u);
  EXPECT_TRUE(ledger.live_allocated_before(10).empty());
}

}  // namespace
}  // namespace tprof
