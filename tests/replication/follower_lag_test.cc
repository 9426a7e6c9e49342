#include "replication/follower_lag.h"

#include <gtest/gtest.h>

#include "common/clock.h"

namespace tokimq::replication {
namespace {

class FollowerLagTest : public ::testing::Test {
 protected:
  ManualClock clock_{1'000'000};
  FollowerLag lag_{&clock_};
};

TEST_F(FollowerLagTest, CaughtUpFollowerHasNoLag) {
  lag_.OnLeaderEnd(PhysicalOffset(500));
  lag_.OnPull("1", PhysicalOffset(500));
  clock_.AdvanceMs(40);
  auto s = lag_.Snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].follower, "1");
  EXPECT_EQ(s[0].acked_offset, PhysicalOffset(500));
  EXPECT_EQ(s[0].lag_bytes, 0);
  EXPECT_EQ(s[0].lag_ms, 0);
  EXPECT_EQ(s[0].last_pull_ms, 40);
}

TEST_F(FollowerLagTest, LagMsIsTheAgeOfTheOldestMissingByte) {
  lag_.OnLeaderEnd(PhysicalOffset(100));
  lag_.OnPull("1", PhysicalOffset(100));
  clock_.AdvanceMs(10);
  lag_.OnLeaderEnd(PhysicalOffset(250));  // bytes 100..250 written at +10 ms
  clock_.AdvanceMs(20);
  lag_.OnLeaderEnd(PhysicalOffset(400));  // 250..400 at +30 ms
  clock_.AdvanceMs(5);
  auto s = lag_.Snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].lag_bytes, 300);
  EXPECT_EQ(s[0].lag_ms, 25);  // 100..250 have waited since +10
  lag_.OnPull("1", PhysicalOffset(250));
  s = lag_.Snapshot();
  EXPECT_EQ(s[0].lag_bytes, 150);
  EXPECT_EQ(s[0].lag_ms, 5);  // only 250..400 missing now
  lag_.OnPull("1", PhysicalOffset(400));
  EXPECT_EQ(lag_.Snapshot()[0].lag_ms, 0);
}

TEST_F(FollowerLagTest, FollowersAreTrackedApartAndAStoppedOneFallsBehind) {
  lag_.OnLeaderEnd(PhysicalOffset(100));
  lag_.OnPull("1", PhysicalOffset(100));
  lag_.OnPull("2", PhysicalOffset(100));
  clock_.AdvanceMs(1);
  lag_.OnLeaderEnd(PhysicalOffset(200));
  lag_.OnPull("1", PhysicalOffset(200));  // follower 2 stopped pulling
  clock_.AdvanceMs(1000);
  lag_.OnLeaderEnd(PhysicalOffset(300));
  lag_.OnPull("1", PhysicalOffset(300));
  auto s = lag_.Snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].lag_bytes, 0);
  EXPECT_EQ(s[1].follower, "2");
  EXPECT_EQ(s[1].lag_bytes, 200);
  EXPECT_EQ(s[1].lag_ms, 1000);
  EXPECT_EQ(s[1].last_pull_ms, 1001);
}

TEST_F(FollowerLagTest, ResetForgetsFollowersAndOldReportsNeverGoBack) {
  lag_.OnLeaderEnd(PhysicalOffset(100));
  lag_.OnPull("1", PhysicalOffset(80));
  lag_.OnPull("1", PhysicalOffset(60));  // reordered report
  EXPECT_EQ(lag_.Snapshot()[0].acked_offset, PhysicalOffset(80));
  lag_.Reset();
  EXPECT_TRUE(lag_.Snapshot().empty());
}

}  // namespace
}  // namespace tokimq::replication
