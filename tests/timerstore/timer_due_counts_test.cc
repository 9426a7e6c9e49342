// TimerStore::PendingByDueTime: pending messages counted by deliver time, per minute for the next
// hour and per hour for the next week (the web console's timer chart), through rolls beyond the
// wheel window, recalls, deliveries and a restart.
#include <gtest/gtest.h>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

constexpr int64_t kP = 1000;
constexpr int64_t kMin = 60'000;
constexpr int64_t kHour = 60 * kMin;

class TimerDueCountsTest : public ::testing::Test {
 protected:
  TimerDueCountsTest() : env_(kP, /*window_ms=*/kHour) { env_.Open(); }

  // `n` messages due `delay_ms` from now (each 1 ms later than the previous).
  void SendMany(const std::string& name, int n, int64_t delay_ms) {
    for (int i = 0; i < n; ++i) {
      const std::string id = name + std::to_string(i);
      handles_[id] = env_.Send(id, env_.clock().NowMs() + delay_ms + i).recall_handle;
    }
  }

  TimerEnv env_;
  std::map<std::string, std::string> handles_;
};

TEST_F(TimerDueCountsTest, CountsPerMinuteAndPerHourByDeliverTime) {
  SendMany("a", 3, 30'000);         // minute 0
  SendMany("b", 2, 90'000);         // minute 1
  SendMany("c", 1, 59 * kMin + 30'000);  // minute 59
  SendMany("d", 4, 2 * kHour + 30'000);  // beyond the 1 h window: parked, rolls
  SendMany("e", 5, 10 * 24 * kHour);     // beyond a week
  env_.Run();

  DueCounts minutes = env_.ts().PendingByDueTime(kMin, 60);
  EXPECT_EQ(minutes.now_ms, env_.clock().NowMs());
  EXPECT_EQ(minutes.bucket_ms, kMin);
  ASSERT_EQ(minutes.counts.size(), 60u);
  EXPECT_EQ(minutes.counts[0], 3);
  EXPECT_EQ(minutes.counts[1], 2);
  EXPECT_EQ(minutes.counts[59], 1);
  int64_t sum = 0;
  for (int64_t c : minutes.counts) sum += c;
  EXPECT_EQ(sum, 6);
  EXPECT_EQ(minutes.later, 9);

  DueCounts hours = env_.ts().PendingByDueTime(kHour, 168);
  ASSERT_EQ(hours.counts.size(), 168u);
  EXPECT_EQ(hours.counts[0], 6);
  EXPECT_EQ(hours.counts[1], 0);
  EXPECT_EQ(hours.counts[2], 4);  // at its deliver hour, not at the slot it is parked in
  EXPECT_EQ(hours.later, 5);
  EXPECT_EQ(hours.counts[0] + hours.counts[2] + hours.later,
            env_.ts().metrics().pending.Value());
}

TEST_F(TimerDueCountsTest, RecallsAndDeliveriesLeaveTheCountsAndARestartKeepsThem) {
  SendMany("a", 3, 30'000);
  SendMany("b", 2, 90'000);
  SendMany("d", 4, 2 * kHour + 30'000);
  env_.Run();
  ASSERT_TRUE(env_.ts().Recall(handles_.at("b0")).ok());
  env_.AdvanceTo(env_.clock().NowMs() + 61'000);  // the a's are delivered
  EXPECT_EQ(env_.Delivered().size(), 3u);

  DueCounts minutes = env_.ts().PendingByDueTime(kMin, 60);
  EXPECT_EQ(minutes.counts[0], 1);  // b1: 29 s left
  EXPECT_EQ(minutes.counts[1], 0);
  EXPECT_EQ(minutes.later, 4);

  DueCounts hours = env_.ts().PendingByDueTime(kHour, 168);
  EXPECT_EQ(hours.counts[0], 1);
  EXPECT_EQ(hours.counts[1], 4);  // 2 h 30 s after the start: 1 h 59 min 29 s from now
  EXPECT_EQ(hours.later, 0);

  // A restart seeds the counts from the wheel's slot counts: every message is still counted;
  // the rolls (beyond the 1 h window) count at the slot they are parked in, the last one of the
  // window, until that slot is walked (TimerStore::PendingByDueTime, docs/console.md).
  env_.CleanRestart();
  hours = env_.ts().PendingByDueTime(kHour, 168);
  EXPECT_EQ(hours.counts[0], 5);
  EXPECT_EQ(hours.later, 0);
  minutes = env_.ts().PendingByDueTime(kMin, 60);
  EXPECT_EQ(minutes.counts[0], 1);
  EXPECT_EQ(minutes.counts[58], 4);  // parked at the window's last slot, 58 min 59 s from now
}

TEST_F(TimerDueCountsTest, OverdueMessagesCountInTheFirstBucket) {
  SendMany("a", 2, 5'000);
  env_.Run();
  // The clock moved past the deliver time but the services have not run yet.
  env_.clock().SetMs(env_.clock().NowMs() + 10 * kMin);
  DueCounts minutes = env_.ts().PendingByDueTime(kMin, 60);
  EXPECT_EQ(minutes.counts[0], 2);
  EXPECT_EQ(minutes.later, 0);
}

TEST_F(TimerDueCountsTest, NoBucketsAskedGivesNone) {
  SendMany("a", 2, 5'000);
  env_.Run();
  EXPECT_TRUE(env_.ts().PendingByDueTime(kMin, 0).counts.empty());
  EXPECT_TRUE(env_.ts().PendingByDueTime(0, 60).counts.empty());
}

}  // namespace
}  // namespace tokimq::testing
