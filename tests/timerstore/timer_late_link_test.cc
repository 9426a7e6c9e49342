// Units linked into the wheel after the dequeue walk already passed their own tick (an idle
// store sitting on a tick boundary walks up to two ticks ahead of the clock): they must come out
// at their own millisecond, exactly once, also across a crash. ManualClock, no sleeps.
#include <gtest/gtest.h>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

class TimerLateLinkTest : public ::testing::TestWithParam<int64_t> {
 protected:
  int64_t P() const { return GetParam(); }
  // Moves the clock to the next tick boundary and lets the walk run ahead of it.
  int64_t IdleAtBoundary(TimerEnv& env) {
    int64_t b = (env.clock().NowMs() / P() + 1) * P();
    env.AdvanceTo(b);
    return b;
  }
  static int CountBody(TimerEnv& env, const std::string& body) {
    int n = 0;
    for (const Message& m : env.Delivered()) n += m.body == body;
    return n;
  }
};

TEST_P(TimerLateLinkTest, HundredMsDelayAfterTheWalkIsDeliveredAtItsMillisecond) {
  TimerEnv env(P());
  env.Open();
  const int64_t b = IdleAtBoundary(env);
  env.Send("late", b + 100);
  env.Run();
  EXPECT_EQ(env.ts().metrics().enqueue_lag.Value(), 0);
  env.AdvanceTo(b + 99);
  EXPECT_EQ(CountBody(env, "late"), 0) << "early";
  env.AdvanceTo(b + 100);
  ASSERT_EQ(CountBody(env, "late"), 1) << "stuck until the clock reaches another tick";
  EXPECT_EQ(env.Delivered()[0].store_ms, b + 100);
  // The regular walk of the slot it was linked into must not deliver it again.
  env.AdvanceTo(b + 5 * P());
  EXPECT_EQ(CountBody(env, "late"), 1) << "duplicate";
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  EXPECT_EQ(env.ts().metrics().delivered.Value(), 1);
  EXPECT_EQ(env.ts().metrics().lateness_ms.Max(), 0);
}

TEST_P(TimerLateLinkTest, EveryDelayInsideTheWalkedTicksComesOutAtItsMillisecond) {
  TimerEnv env(P());
  env.Open();
  const int64_t b = IdleAtBoundary(env);
  // Ticks b/P and b/P+1 are walked; b/P+2 (delay 2P) is the next slot to walk.
  const std::vector<int64_t> delays = {1, P() / 2, P() - 1, P(), P() + 1, 2 * P() - 1, 2 * P()};
  for (int64_t d : delays) env.Send("d" + std::to_string(d), b + d);
  env.Run();
  for (int64_t d : delays) {
    env.AdvanceTo(b + d - 1);
    EXPECT_EQ(CountBody(env, "d" + std::to_string(d)), 0) << "early: " << d;
    env.AdvanceTo(b + d);
    EXPECT_EQ(CountBody(env, "d" + std::to_string(d)), 1) << "late: " << d;
  }
  env.AdvanceTo(b + 6 * P());
  env.CheckHistory(env.sent());
  for (const Message& m : env.Delivered()) EXPECT_EQ(m.store_ms, env.sent()[m.body]) << m.body;
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

TEST_P(TimerLateLinkTest, RecallBeforeDueIsNeverDelivered) {
  TimerEnv env(P());
  env.Open();
  const int64_t b = IdleAtBoundary(env);
  ScheduleResult r = env.Send("late", b + 100);
  env.Run();
  // Recall answers conservatively for a tick the walk has passed, but whatever it answers,
  // OK must mean "never delivered".
  absl::Status s = env.ts().Recall(r.recall_handle);
  env.Run();
  env.AdvanceTo(b + 5 * P());
  EXPECT_EQ(CountBody(env, "late"), s.ok() ? 0 : 1) << s;
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

// Crash points: linked (checkpointed or not), delivered (durable, checkpointed or not). Then:
// exactly once, never early, and a unit not yet delivered still comes out at its millisecond
// without waiting for its slot's regular walk.
TEST_P(TimerLateLinkTest, CrashAfterTheHandOverNeitherDuplicatesNorDelays) {
  for (int point = 0; point < 4; ++point) {
    SCOPED_TRACE(point);
    TimerEnv env(P());
    env.Open();
    const int64_t b = IdleAtBoundary(env);
    env.Send("late", b + 100);
    env.Ack();
    env.Run();
    if (point == 1 || point == 3) {
      ASSERT_TRUE(env.ts().Checkpoint().ok());
    }
    const bool delivered_before = point >= 2;
    if (delivered_before) {
      env.AdvanceTo(b + 100);
      ASSERT_EQ(CountBody(env, "late"), 1);
      env.Ack();
      if (point == 3) {
        ASSERT_TRUE(env.ts().Checkpoint().ok());
      }
    }
    env.Crash();
    env.Run();
    if (!delivered_before) {
      env.AdvanceTo(b + 99);
      EXPECT_EQ(CountBody(env, "late"), 0) << "early";
      env.AdvanceTo(b + 100);
      EXPECT_EQ(CountBody(env, "late"), 1) << "late after the restart";
    }
    env.AdvanceTo(b + 5 * P());
    env.CheckHistory(env.sent());
    EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Precision, TimerLateLinkTest, ::testing::Values(1000, 100),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace tokimq::testing
