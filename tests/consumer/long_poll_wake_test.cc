// LongPollWake: the lock-free long-poll wake-up (broker/src/consumer/long_poll_wake.h).
#include "consumer/long_poll_wake.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/clock.h"

namespace tokimq::consumer {
namespace {

using RealClock = std::chrono::steady_clock;

// A deadline `ms` from now on the system clock (µs since the epoch, as WaitAfter takes it).
int64_t SystemDeadline(int64_t ms) { return SystemClock::Default()->NowMicros() + ms * 1000; }

TEST(LongPollWakeTest, ANotificationAfterObserveEndsTheWaitAtOnce) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  w.Notify("orders");  // between the waiter's scan and its sleep: must not be lost
  const auto start = RealClock::now();
  EXPECT_TRUE(w.WaitAfter(seen, "orders", "%RETRY%g", *SystemClock::Default(),
                          SystemDeadline(30'000), stop));
  EXPECT_LT(RealClock::now() - start, std::chrono::seconds(5));
}

TEST(LongPollWakeTest, TheRetryTopicWakesToo) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  w.Notify("%RETRY%g");
  EXPECT_TRUE(w.WaitAfter(seen, "orders", "%RETRY%g", *SystemClock::Default(),
                          SystemDeadline(30'000), stop));
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
  const auto start = RealClock::now();
  EXPECT_FALSE(w.WaitAfter(seen, "orders", "%RETRY%g", *SystemClock::Default(),
                           SystemDeadline(2), stop));
  EXPECT_GE(RealClock::now() - start, std::chrono::milliseconds(2));
}

TEST(LongPollWakeTest, ASleepingWaiterIsWokenByNotifyFromAnotherThread) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    result = w.WaitAfter(seen, "orders", "%RETRY%g", *SystemClock::Default(),
                         SystemDeadline(60'000), stop)
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
    if (w.WaitAfter(seen, "orders", "%RETRY%g", *SystemClock::Default(), SystemDeadline(60'000),
                    stop))
      ++woken;
  });
  std::thread b([&] {
    if (w.WaitAfter(seen, "audit", "%RETRY%h", *SystemClock::Default(), SystemDeadline(60'000),
                    stop))
      ++woken;
  });
  stop = true;
  w.WakeAll();
  a.join();
  b.join();
  EXPECT_EQ(woken.load(), 2);
}

// The deadline is read from the Clock given: a ManualClock already past it ends the wait at
// once, though the deadline is 30 s of real time away.
TEST(LongPollWakeTest, TheDeadlineIsOnTheGivenClock) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  ManualClock clock;
  const int64_t deadline_us = clock.NowMicros() + 30'000'000;
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  clock.AdvanceMs(30'000);
  const auto start = RealClock::now();
  EXPECT_FALSE(w.WaitAfter(seen, "orders", "%RETRY%g", clock, deadline_us, stop));
  EXPECT_LT(RealClock::now() - start, std::chrono::seconds(5));
}

// A ManualClock that never moves: the wait still ends, after its length (20 ms) of real time.
TEST(LongPollWakeTest, OnAClockThatStandsStillTheWaitEndsAfterItsLengthOfRealTime) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  ManualClock clock;
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  const auto start = RealClock::now();
  EXPECT_FALSE(w.WaitAfter(seen, "orders", "%RETRY%g", clock, clock.NowMicros() + 20'000, stop));
  const auto took = RealClock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(20));
  EXPECT_LT(took, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tokimq::consumer
