#include "cluster/lease_fence.h"

#include <gtest/gtest.h>

namespace tokimq::cluster {
namespace {

TEST(LeaseFenceTest, ValidUntilSendTimePlusTtlMinusMargin) {
  LeaseFence f(500);
  EXPECT_FALSE(f.Valid(0));  // never granted
  f.Renewed(/*sent_ms=*/10'000, /*ttl_s=*/3);
  EXPECT_EQ(f.valid_until_ms(), 12'500);
  EXPECT_TRUE(f.Valid(12'499));
  EXPECT_FALSE(f.Valid(12'500));  // etcd could expire it from 13'000 on
}

TEST(LeaseFenceTest, ALateAnswerToAnOlderKeepaliveDoesNotMoveItBack) {
  LeaseFence f(500);
  f.Renewed(20'000, 3);
  f.Renewed(19'000, 3);
  EXPECT_EQ(f.valid_until_ms(), 22'500);
  f.Reset();
  EXPECT_FALSE(f.Valid(20'001));
}

}  // namespace
}  // namespace tokimq::cluster
