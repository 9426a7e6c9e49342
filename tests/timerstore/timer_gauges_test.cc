// The timer gauges computed on request (TimerStore::RefreshGauges): pending by remaining delay
// equals the true pending messages by remaining delay after sends, recalls, rolls and
// deliveries, and dequeue_lag_ms is 0 once nothing due is left.
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

constexpr int64_t kP = 1000;
constexpr int64_t kMin = 60'000;
constexpr int64_t kHour = 60 * kMin;
constexpr std::array<int64_t, 8> kBounds = {5'000,   kMin,      5 * kMin,  15 * kMin,
                                            kHour,   4 * kHour, 8 * kHour, 24 * kHour};

using Buckets = std::array<int64_t, 9>;

class TimerGaugesTest : public ::testing::Test {
 protected:
  TimerGaugesTest() : env_(kP, /*window_ms=*/kHour) { env_.Open(); }

  // What the gauge must say: every sent message neither delivered nor recalled, by the time
  // left until the start of its deliver tick.
  Buckets Truth() {
    std::set<std::string> delivered;
    for (const Message& m : env_.Delivered()) delivered.insert(m.body);
    Buckets b{};
    const int64_t now = env_.clock().NowMs();
    for (const auto& [id, deliver] : env_.sent()) {
      if (delivered.contains(id) || recalled_.contains(id)) continue;
      const int64_t remaining = deliver / kP * kP - now;
      size_t i = 0;
      while (i < kBounds.size() && remaining > kBounds[i]) ++i;
      b[i]++;
    }
    return b;
  }
  Buckets Gauge() {
    env_.ts().RefreshGauges();
    Buckets b{};
    for (size_t i = 0; i < b.size(); ++i) b[i] = env_.ts().metrics().pending_by_bucket[i].Value();
    return b;
  }
  int64_t Pending() { return env_.ts().metrics().pending.Value(); }
  void Recall(const std::string& id) {
    ASSERT_TRUE(env_.ts().Recall(handles_.at(id)).ok()) << id;
    recalled_.insert(id);
  }
  void Send(const std::string& id, int64_t delay_ms) {
    handles_[id] = env_.Send(id, env_.clock().NowMs() + delay_ms).recall_handle;
  }

  TimerEnv env_;
  std::map<std::string, std::string> handles_;
  std::set<std::string> recalled_;
};

int64_t Sum(const Buckets& b) {
  int64_t s = 0;
  for (int64_t v : b) s += v;
  return s;
}

TEST_F(TimerGaugesTest, PendingByDelayEqualsTruePendingThroughRecallsRollsAndDeliveries) {
  // Delays in every bucket; those from 2 h on lie beyond the 1 h wheel window and roll.
  const std::vector<std::pair<int64_t, int>> plan = {
      {3'000, 10},          {30'000, 20},        {4 * kMin, 30},      {10 * kMin, 40},
      {50 * kMin, 50},      {2 * kHour, 60},     {6 * kHour, 5},      {20 * kHour, 7},
      {48 * kHour + 7, 8}};
  for (const auto& [delay, n] : plan) {
    for (int i = 0; i < n; ++i) Send("d" + std::to_string(delay) + "_" + std::to_string(i), delay + i);
  }
  env_.Run();
  EXPECT_EQ(Pending(), 230);
  Buckets truth = Truth();
  EXPECT_EQ(truth, (Buckets{10, 20, 30, 40, 50, 60, 5, 7, 8}));
  EXPECT_EQ(Gauge(), truth);

  // Recalls: near ones and rolled ones.
  for (int i = 0; i < 5; ++i) Recall("d30000_" + std::to_string(i));
  for (int i = 0; i < 3; ++i) Recall("d" + std::to_string(2 * kHour) + "_" + std::to_string(i));
  env_.Run();
  EXPECT_EQ(Pending(), 222);
  EXPECT_EQ(Gauge(), Truth());

  // Time passes in steps: deliveries, rolls re-linked as the window moves, buckets shifting.
  const int64_t start = env_.clock().NowMs();
  for (int64_t at : {int64_t{4'000}, 35'000 + kP, 5 * kMin, 12 * kMin, 55 * kMin, 70 * kMin,
                     2 * kHour - 1, 2 * kHour + kMin, 5 * kHour, 19 * kHour, 30 * kHour,
                     47 * kHour, 50 * kHour}) {
    env_.AdvanceTo(start + at);
    Buckets g = Gauge();
    EXPECT_EQ(g, Truth()) << "at +" << at << " ms";
    EXPECT_EQ(Sum(g), Pending()) << "at +" << at << " ms";
  }
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(Gauge(), Buckets{});
  EXPECT_GT(env_.ts().metrics().rolled.Value(), 0);
  EXPECT_EQ(env_.Delivered().size(), 222u);
}

TEST_F(TimerGaugesTest, PendingByDelayIsCurrentWithoutACheckpointOrIdleRun) {
  // Gauges that moved only at checkpoints and idle runs would give a Stats request the picture
  // of up to a second ago: RefreshGauges computes them at the time asked.
  for (int i = 0; i < 100; ++i) Send("m" + std::to_string(i), 8'000);
  env_.Run();
  EXPECT_EQ(Gauge()[1], 100);  // 8 s left: (5 s, 1 min]
  env_.clock().AdvanceMs(4'000);  // no Run
  EXPECT_EQ(Gauge()[0], 100);     // 4 s left
  EXPECT_EQ(Gauge()[1], 0);
}

TEST_F(TimerGaugesTest, RestartedStoreCountsPendingByDelayFromTheWheel) {
  for (int i = 0; i < 20; ++i) Send("near" + std::to_string(i), 20'000 + i);
  for (int i = 0; i < 30; ++i) Send("far" + std::to_string(i), 3 * kHour + i);  // rolls
  for (int i = 0; i < 4; ++i) Recall("near" + std::to_string(i));
  env_.Run();
  env_.CleanRestart();
  env_.Run();
  EXPECT_EQ(Pending(), 46);
  // Rolled units are seeded at their parking slot (inside the 1 h window), so only the sum
  // and the near bucket are exact right after a restart.
  Buckets g = Gauge();
  EXPECT_EQ(g[1], 16);
  EXPECT_EQ(Sum(g), 46);
  // Once their parking slots are walked, they count at their deliver time again.
  const int64_t start = env_.clock().NowMs();
  for (int64_t at : {int64_t{30'000}, kHour + kMin, 2 * kHour, 3 * kHour + kMin}) {
    env_.AdvanceTo(start + at);
    if (at >= kHour + kMin) {
      EXPECT_EQ(Gauge(), Truth()) << "at +" << at;
    }
    EXPECT_EQ(Sum(Gauge()), Pending());
  }
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(Gauge(), Buckets{});
}

TEST_F(TimerGaugesTest, DequeueLagIsZeroWhenNothingDueIsLeft) {
  for (int i = 0; i < 50; ++i) Send("m" + std::to_string(i), 2'000 + i);
  env_.Run();
  env_.ts().RefreshGauges();
  EXPECT_EQ(env_.ts().metrics().dequeue_lag_ms.Value(), 0);  // nothing due yet
  // Due and not delivered: the lag is how long ago the oldest due tick ended.
  const int64_t due_tick_end = ((env_.clock().NowMs() + 2'000) / kP + 1) * kP;
  env_.clock().AdvanceMs(10'000);  // no Run: nothing moved
  env_.ts().RefreshGauges();
  EXPECT_EQ(env_.ts().metrics().dequeue_lag_ms.Value(), env_.clock().NowMs() - due_tick_end);
  env_.Run();
  EXPECT_EQ(env_.Delivered().size(), 50u);
  env_.ts().RefreshGauges();
  EXPECT_EQ(env_.ts().metrics().dequeue_lag_ms.Value(), 0);
  // A restart long after the last checkpoint (a manual clock advanced by 55 min): the read tick
  // is the checkpoint's, but nothing is due, so no lag (not 3,300,000+ ms until the next
  // checkpoint).
  ASSERT_TRUE(env_.ts().Checkpoint().ok());
  env_.clock().AdvanceMs(3'333'000);
  env_.CleanRestart();
  EXPECT_EQ(env_.ts().metrics().dequeue_lag_ms.Value(), 0);
  env_.ts().RefreshGauges();
  EXPECT_EQ(env_.ts().metrics().dequeue_lag_ms.Value(), 0);
}

TEST(TimerGaugesPrecisionTest, BucketBoundsAreExactToTheTickAt100Ms) {
  TimerEnv env(/*precision_ms=*/100, /*window_ms=*/kHour);
  env.Open();
  const int64_t now = env.clock().NowMs();  // ...123: not on a tick
  // Remaining to the start of the deliver tick, either side of each bound.
  Buckets want{};
  int n = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    for (int64_t remaining : {kBounds[i] - 100, kBounds[i], kBounds[i] + 100}) {
      const int64_t tick_start = (now + remaining) / 100 * 100 + 100;  // next tick start
      env.Send("b" + std::to_string(n++), tick_start + 7);
      const int64_t left = tick_start - now;
      size_t b = 0;
      while (b < kBounds.size() && left > kBounds[b]) ++b;
      want[b]++;
    }
  }
  env.Run();
  env.ts().RefreshGauges();
  Buckets got{};
  for (size_t i = 0; i < got.size(); ++i) got[i] = env.ts().metrics().pending_by_bucket[i].Value();
  EXPECT_EQ(got, want);
  EXPECT_EQ(Sum(got), n);
}

}  // namespace
}  // namespace tokimq::testing
