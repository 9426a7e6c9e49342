// LongPollWake: the lock-free long-poll wake-up (broker/src/consumer/long_poll_wake.h).
#include "consumer/long_poll_wake.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
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

// A ManualClock that counts its readings, so a test knows when a waiter has read it.
class CountingClock final : public Clock {
 public:
  int64_t NowMicros() const override {
    reads_.fetch_add(1);
    return clock_.NowMicros();
  }
  void WaitUntilMs(int64_t deadline_ms, std::chrono::milliseconds timeout) const override {
    clock_.WaitUntilMs(deadline_ms, timeout);
  }
  bool IsManual() const override { return true; }
  ManualClock& manual() { return clock_; }
  int reads() const { return reads_.load(); }

 private:
  ManualClock clock_;
  mutable std::atomic<int> reads_{0};
};

// The deadline is read from the Clock given, at every wake-up: the clock moved past it after
// the waiter read it ends the wait at the next wake-up (a notification for another topic),
// though the deadline is 30 s of real time away.
TEST(LongPollWakeTest, TheDeadlineIsOnTheGivenClock) {
  LongPollWake w;
  std::atomic<bool> stop{false};
  CountingClock clock;
  // A topic whose counter is not the waiter's (256 counters; a collision would wake it as if
  // for its own topics).
  std::string other;
  for (const char* t : {"payments", "audit", "emails", "invoices"}) {
    const LongPollWake::Seen before = w.Observe("orders", "%RETRY%g");
    w.Notify(t);
    if (w.Observe("orders", "%RETRY%g").topics == before.topics) {
      other = t;
      break;
    }
  }
  if (other.empty()) GTEST_SKIP() << "every name collided with the waiter's";
  const LongPollWake::Seen seen = w.Observe("orders", "%RETRY%g");
  const int64_t deadline_us = clock.NowMicros() + 30'000'000;
  const int reads_before = clock.reads();
  std::atomic<int> result{-1};
  const auto start = RealClock::now();
  std::thread waiter([&] {
    result = w.WaitAfter(seen, "orders", "%RETRY%g", clock, deadline_us, stop) ? 1 : 0;
  });
  // Until the waiter has read the clock (or already returned).
  while (clock.reads() == reads_before && result.load() == -1) std::this_thread::yield();
  clock.manual().AdvanceMs(30'000);
  // Woken by any of these (or never asleep yet: its next reading is past the deadline).
  while (result.load() == -1 && RealClock::now() - start < std::chrono::seconds(60)) {
    w.Notify(other);
    std::this_thread::yield();
  }
  waiter.join();
  EXPECT_EQ(result.load(), 0);  // the deadline passed; no notification for its topics
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
