// Lease-expiry index (broker/src/consumer/lease_expiry_index.h).
#include "consumer/lease_expiry_index.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace tokimq::consumer {
namespace {

TEST(LeaseExpiryIndex, PopsDueEntriesEarliestFirstAndNothingBeforeItsDeadline) {
  LeaseExpiryIndex index;
  index.Add(2'000, Expiry{nullptr, 5, 9});
  index.Add(1'000, Expiry{nullptr, 1, 4});
  EXPECT_EQ(index.NextMs(), 1'000);
  EXPECT_EQ(index.size(), 2u);
  int64_t deadline = 0;
  Expiry e;
  EXPECT_FALSE(index.PopDue(999, &deadline, &e));
  ASSERT_TRUE(index.PopDue(2'000, &deadline, &e));
  EXPECT_EQ(deadline, 1'000);
  EXPECT_EQ(e.first, 1);
  EXPECT_EQ(e.last, 4);
  ASSERT_TRUE(index.PopDue(2'000, &deadline, &e));
  EXPECT_EQ(deadline, 2'000);
  EXPECT_EQ(e.first, 5);
  EXPECT_FALSE(index.PopDue(INT64_MAX, &deadline, &e));
  EXPECT_EQ(index.NextMs(), INT64_MAX);
}

TEST(LeaseExpiryIndex, CompactionBoundIsFourTimesLivePlus1024ThenTwiceTheLastSize) {
  LeaseExpiryIndex index;
  for (int i = 0; i < 4 * (10 + 1024); ++i) index.Add(i, Expiry{});
  EXPECT_FALSE(index.OverCompactionBound(10));  // 4136 entries: at the bound
  index.Add(0, Expiry{});
  EXPECT_TRUE(index.OverCompactionBound(10));
  EXPECT_FALSE(index.OverCompactionBound(11));
  EXPECT_EQ(index.TakeAll(), 4137u);
  EXPECT_EQ(index.size(), 0u);
  for (int i = 0; i < 5'000; ++i) index.Add(i, Expiry{});
  index.FinishCompaction();  // 5000 entries after the rebuild: the bound is now 10000
  for (int i = 0; i < 5'000; ++i) index.Add(i, Expiry{});
  EXPECT_FALSE(index.OverCompactionBound(0));
  index.Add(0, Expiry{});
  EXPECT_TRUE(index.OverCompactionBound(0));
}

TEST(LeaseExpiryIndex, WaitReturnsAtOnceWhenAnEarlierEntryIsThereOrStopHolds) {
  LeaseExpiryIndex index;
  index.Add(500, Expiry{});
  const auto start = std::chrono::steady_clock::now();
  // Without the earlier entry or stop() these would each wait the full hour.
  index.WaitForEarlier(1'000, std::chrono::hours(1), [] { return false; });
  index.WaitForEarlier(100, std::chrono::hours(1), [] { return true; });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::minutes(1));
}

}  // namespace
}  // namespace tokimq::consumer
