// Hot tick, scaled down: many messages in one tick are all delivered, never
// early; the ticks around it are delivered at their own millisecond (not held up by the hot
// one); the pending gauge never goes negative and always equals scheduled - delivered.
// The full-size figure (500k in one second, real clock) is in bench/timerstore_bench.cc.
#include <gtest/gtest.h>

#include <string>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

class TimerHotTickTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(TimerHotTickTest, HotTickDeliveredFullyNeighboursOnTime) {
  const int64_t p = GetParam();
  constexpr int kHot = 20'000;
  TimerEnv env(p, 3'600'000, 8 << 20);
  env.Open();
  const int64_t hot = (env.clock().NowMs() / p + 10) * p;  // start of the hot tick
  std::map<std::string, int64_t> hot_ids, other_ids;
  for (int i = 0; i < kHot; ++i) {
    std::string id = "h" + std::to_string(i);
    env.Send(id, hot + i % p, "hot");
    hot_ids[id] = hot + i % p;
  }
  for (int64_t t = -3; t <= 3; ++t) {
    if (t == 0) continue;
    std::string id = "o" + std::to_string(t);
    env.Send(id, hot + t * p + p / 2, "other");
    other_ids[id] = hot + t * p + p / 2;
  }
  // A neighbour inside the hot tick itself, due at its last millisecond.
  env.Send("o-in", hot + p - 1, "other");
  other_ids["o-in"] = hot + p - 1;
  env.Ack();

  const int64_t total = kHot + static_cast<int64_t>(other_ids.size());
  auto& m = env.ts().metrics();
  for (int64_t now = hot - 4 * p; now <= hot + 4 * p; now += p / 4) {
    env.AdvanceTo(now);
    int64_t due_hot = 0, due_other = 0;
    for (const auto& [id, d] : hot_ids) due_hot += d <= now;
    for (const auto& [id, d] : other_ids) due_other += d <= now;
    // Everything due is out, nothing else (RunUntilIdle ran to idle at `now`).
    ASSERT_EQ(env.ms().MaxQueueOffset("hot", 0).value(), due_hot) << "now=" << now;
    ASSERT_EQ(env.ms().MaxQueueOffset("other", 0).value(), due_other) << "now=" << now;
    EXPECT_EQ(m.pending.Value(), total - due_hot - due_other) << "now=" << now;
    EXPECT_EQ(m.pending.underflows(), 0);
    for (const auto& g : m.pending_by_bucket) EXPECT_GE(g.Value(), 0);
    EXPECT_GE(m.enqueue_lag.Value(), 0);
    EXPECT_GE(m.dequeue_lag_ms.Value(), 0);
  }
  env.CheckHistory(hot_ids, "hot");
  env.CheckHistory(other_ids, "other");
  // Neighbours at their own millisecond, hot ones too (the clock stood still while they went).
  for (const Message& msg : env.Delivered("other")) {
    EXPECT_EQ(msg.store_ms,
              other_ids[msg.body] + (p / 4 - (other_ids[msg.body] - hot) % (p / 4)) % (p / 4))
        << msg.body;
  }
  EXPECT_EQ(m.delivered.Value(), total);
  EXPECT_EQ(m.pending.Value(), 0);
}

INSTANTIATE_TEST_SUITE_P(Precision, TimerHotTickTest, ::testing::Values(1000, 100),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace tokimq::testing
