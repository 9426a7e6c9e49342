// Issue 25: running out of descriptors while moving due messages to their topics is transient.
// The units are retried (never dropped, never parked as poison), nothing is delivered twice, and
// delivery resumes as soon as opens succeed again.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "timer_env.h"

namespace tokimq {
namespace {

using testing::kStartMs;
using testing::TimerEnv;

TEST(TimerResourceTest, OutOfDescriptorsAtDeliveryRetriesEveryUnitAndDeliversEachOnce) {
  TimerEnv env(100);
  env.Open();
  constexpr int kTopics = 10;
  const int64_t due = kStartMs + 1000;
  std::map<std::string, std::map<std::string, int64_t>> expected;  // topic -> id -> due
  for (int t = 0; t < kTopics; ++t) {
    const std::string topic = "t" + std::to_string(t);
    for (int i = 0; i < 3; ++i) {
      const std::string id = topic + "-" + std::to_string(i);
      env.Send(id, due, topic);
      expected[topic][id] = due;
    }
  }
  env.Ack();
  env.Run();  // enqueued into the TimerLog and wheel

  // The real topics' ConsumeQueues do not exist yet: creating one lists its directory, which
  // needs a descriptor.
  env.fs().SetFailOpen(true);
  env.clock().SetMs(due);
  // Each round is past the dequeue steps' backoff (10 ms doubling to 1 s, on the store's clock),
  // so each one tries again and fails again.
  for (int round = 0; round < 3; ++round) {
    env.clock().SetMs(due + round * 1000);
    absl::Status st = env.ts().RunUntilIdle();
    EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  }
  EXPECT_EQ(env.ts().metrics().delivered.Value(), 0);
  EXPECT_EQ(env.ts().metrics().dropped.Value(), 0);
  for (int t = 0; t < kTopics; ++t) EXPECT_TRUE(env.Delivered("t" + std::to_string(t)).empty());

  env.fs().SetFailOpen(false);  // descriptors are back
  env.AdvanceTo(due + 3000);     // past the longest backoff
  EXPECT_EQ(env.ts().metrics().delivered.Value(), kTopics * 3);
  EXPECT_EQ(env.ts().metrics().dropped.Value(), 0);
  for (const auto& [topic, ids] : expected) env.CheckHistory(ids, topic);
}

}  // namespace
}  // namespace tokimq
