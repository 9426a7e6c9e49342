// Which puts wake the enqueue thread (issue 21 item 1): a put due at least
// enqueue_wake_horizon_ms ahead is left to the thread's 10 ms poll; sooner ones, recalls and
// ScheduleBatch calls holding one such message wake it at once. Without threads (RunUntilIdle
// on a ManualClock) the decision is counted in metrics().enqueue_wakes; deferred puts are still
// enqueued by the steps and delivered at their millisecond.
#include <gtest/gtest.h>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

class TimerEnqueueWakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.topts().enqueue_wake_horizon_ms = 1000;
    env_.Open();
  }
  ScheduleItem Item(const std::string& id, int64_t deliver_ms) {
    ScheduleItem it;
    it.msg.topic = "t";
    it.msg.queue_id = 0;
    it.msg.body = id;
    it.msg.properties[prop::kMessageId] = id;
    it.deliver_ms = deliver_ms;
    env_.sent()[id] = deliver_ms;
    return it;
  }
  int64_t Wakes() { return env_.ts().metrics().enqueue_wakes.Value(); }

  TimerEnv env_{1000};
};

TEST_F(TimerEnqueueWakeTest, PutsDueBeyondTheHorizonDoNotWakeTheEnqueueThread) {
  const int64_t now = env_.clock().NowMs();
  for (int i = 0; i < 100; ++i) env_.Send("far" + std::to_string(i), now + 3'600'000 + i);
  env_.Send("edge", now + 1000);  // exactly the horizon: left to the poll
  EXPECT_EQ(Wakes(), 0);
  // The steps the thread runs at its poll enqueue them all.
  env_.Run();
  EXPECT_EQ(env_.ts().metrics().pending.Value(), 101);
  EXPECT_EQ(env_.ts().metrics().enqueue_lag.Value(), 0);
}

TEST_F(TimerEnqueueWakeTest, PutsDueWithinTheHorizonAndRecallsWakeItOnce) {
  const int64_t now = env_.clock().NowMs();
  env_.Send("soon", now + 999);
  EXPECT_EQ(Wakes(), 1);
  // One wake per batch, decided by its earliest timer-topic message; messages due now go
  // straight to their topic and do not count.
  auto r = env_.ts().ScheduleBatch(
      {Item("b1", now + 3'600'000), Item("b2", now + 10), Item("b3", now + 20), Item("now", now)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Wakes(), 2);
  auto far = env_.ts().ScheduleBatch({Item("f1", now + 5000), Item("f2", now + 6000)});
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_EQ(Wakes(), 2);
  ASSERT_TRUE(env_.ts().Recall((*far)[0].recall_handle).ok());
  EXPECT_EQ(Wakes(), 3);
  env_.sent().erase("f1");
  env_.Run();
  EXPECT_EQ(env_.ts().metrics().pending.Value(), 5);  // soon, b1, b2, b3, f2
}

TEST_F(TimerEnqueueWakeTest, HorizonZeroWakesOnEveryPut) {
  TimerEnv env(1000);
  env.topts().enqueue_wake_horizon_ms = 0;
  env.Open();
  const int64_t now = env.clock().NowMs();
  for (int i = 0; i < 5; ++i) env.Send("far" + std::to_string(i), now + 3'600'000);
  EXPECT_EQ(env.ts().metrics().enqueue_wakes.Value(), 5);
}

TEST_F(TimerEnqueueWakeTest, DeferredPutsAreDeliveredAtTheirMillisecond) {
  const int64_t now = env_.clock().NowMs();
  // Left to the poll, and the clock passes the slot walk before the steps run: the units are
  // linked into already-walked slots and still come out at their own millisecond.
  env_.Send("a", now + 1500);
  env_.Send("b", now + 2700);
  EXPECT_EQ(Wakes(), 0);
  env_.clock().SetMs(now + 1400);
  env_.Run();
  env_.AdvanceTo(now + 1499);
  EXPECT_TRUE(env_.Delivered().empty());
  env_.AdvanceTo(now + 1500);
  env_.AdvanceTo(now + 2700);
  env_.CheckHistory(env_.sent());
  EXPECT_EQ(env_.ts().metrics().lateness_ms.Max(), 0);
}

}  // namespace
}  // namespace tokimq::testing
