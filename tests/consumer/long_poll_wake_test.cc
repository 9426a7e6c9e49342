// LongPollWake: the lock-free long-poll wake-up (broker/src/consumer/long_poll_wake.h).
#include "consumer/long_poll_wake.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tokimq::consumer {
namespace {

using Clock = std::chrono::steady_clock;

TEST(LongPollWakeTest, ANotificationAfterObserveEndsTheWaitAtOnce) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  w.Notify("orders");  // between the waiter's scan and its sleep: must not be lost
  const auto start = Clock::now();
  EXPECT_TRUE(w.WaitAfter(seen, "orders", "%RETRY%g", start + std::chrono::seconds(30), stop));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(LongPollWakeTest, TheRetryTopicWakesToo) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  w.Notify("%RETRY%g");
  EXPECT_TRUE(
      w.WaitAfter(seen, "orders", "%RETRY%g", Clock::now() + std::chrono::seconds(30), stop));
}

TEST(LongPollWakeTest, NothingForItsTopicsWaitsUntilTheDeadline) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  // Names whose counters differ from the waiter's (256 counters; a collision would only
  // make the waiter rescan, but this test wants a real "not for you").
  int others = 0;
  for (const char* t : {"payments", "audit", "emails", "invoices"}) {
    const LongPollWake::Seen before = w.Observe("orders", "%RETRY%g");
    w.Notify(t);
    if (w.Observe("orders", "%RETRY%g").topics == before.topics) ++others;
  }
  ASSERT_GT(others, 0);
  const LongPollWake::Seen mine = w.Observe("orders", "%RETRY%g");
  if (mine.topics != seen.topics) GTEST_SKIP() << "every name collided with the waiter's";
  // A bounded real-time wait (2 ms): nothing may end it early.
  const auto deadline = Clock::now() + std::chrono::milliseconds(2);
  EXPECT_FALSE(w.WaitAfter(seen, "orders", "%RETRY%g", deadline, stop));
  EXPECT_GE(Clock::now(), deadline);
}

TEST(LongPollWakeTest, ASleepingWaiterIsWokenByNotifyFromAnotherThread) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    result = w.WaitAfter(seen, "orders", "%RETRY%g", Clock::now() + std::chrono::seconds(60),
                         stop)
                 ? 1
                 : 0;
  });
  w.Notify("orders");
  waiter.join();  // returns only if woken (the deadline is a minute away)
  EXPECT_EQ(result.load(), 1);
}

TEST(LongPollWakeTest, StopWakesEveryWaiter) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  std::atomic<int> woken{0};
  std::thread a([&] {
    if (w.WaitAfter(seen, "orders", "%RETRY%g", Clock::now() + std::chrono::seconds(60), stop))
      ++woken;
  });
  std::thread b([&] {
    if (w.WaitAfter(seen, "audit", "%RETRY%h", Clock::now() + std::chrono::seconds(60), stop))
      ++woken;
  });
  stop = true;
  w.WakeAll();
  a.join();
  b.join();
  EXPECT_EQ(woken.load(), 2);
}

}  // namespace
}  // namespace tokimq::consumer
