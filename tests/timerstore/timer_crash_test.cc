// Crash tests: kill -9 (+ loss of unsynced bytes) at each step boundary and in the middle of
// writes, then the history check: 0 lost, 0 early, 0 duplicates in the real topic.
#include <gtest/gtest.h>

#include <filesystem>

#include "timer_env.h"

namespace tokimq::testing {
namespace {

class TimerCrashTest : public ::testing::TestWithParam<int64_t> {};

// A workload spread over a few ticks with one roll, acknowledged (flushed) before crashes.
void SendWorkload(TimerEnv& env, int64_t base) {
  for (int i = 0; i < 60; ++i) env.Send("w" + std::to_string(i), base + 200 + i * 47);
  env.Send("roll", base + 2 * 3'600'000 + 5);  // beyond the 1 h window
  env.Ack();
}

TEST_P(TimerCrashTest, CrashAtEachStepBoundaryLosesAndDuplicatesNothing) {
  // Boundaries: after send (nothing enqueued), after enqueue, after checkpoint, mid-tick with
  // part delivered (durable or not), after all delivered before checkpoint, after roll.
  for (int point = 0; point < 7; ++point) {
    SCOPED_TRACE(point);
    TimerEnv env(GetParam());
    env.Open();
    int64_t base = env.clock().NowMs();
    SendWorkload(env, base);
    if (point >= 1) env.Run();
    if (point >= 2) {
      ASSERT_TRUE(env.ts().Checkpoint().ok());
    }
    if (point >= 3) env.AdvanceTo(base + 200 + 30 * 47);
    if (point >= 4) env.Ack();
    if (point >= 5) env.AdvanceTo(base + 200 + 60 * 47);
    if (point >= 6) env.AdvanceTo(base + 3'600'000 + 1000);  // roll unit re-linked
    env.Crash();
    if (point == 6) {
      env.Crash();  // twice in a row
    }
    env.AdvanceTo(base + 2 * 3'600'000 + 5);
    env.CheckHistory(env.sent());
    EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  }
}

TEST_P(TimerCrashTest, TornWriteAnywhereDuringDeliveryLosesAndDuplicatesNothing) {
  // Learn how many bytes a delivery run writes, then tear the write stream at points across it.
  uint64_t span = 0;
  {
    TimerEnv env(GetParam());
    env.Open();
    int64_t base = env.clock().NowMs();
    SendWorkload(env, base);
    env.Run();
    ASSERT_TRUE(env.ts().Checkpoint().ok());
    uint64_t before = env.fs().bytes_written();
    env.AdvanceTo(base + 200 + 60 * 47);
    ASSERT_TRUE(env.ts().Checkpoint().ok());
    span = env.fs().bytes_written() - before;
  }
  ASSERT_GT(span, 0u);
  for (uint64_t cut = 0; cut < span; cut += std::max<uint64_t>(1, span / 25)) {
    SCOPED_TRACE(cut);
    TimerEnv env(GetParam());
    env.Open();
    int64_t base = env.clock().NowMs();
    SendWorkload(env, base);
    env.Run();
    ASSERT_TRUE(env.ts().Checkpoint().ok());
    env.fs().TearAfterBytes(cut);
    env.clock().SetMs(base + 200 + 60 * 47);
    (void)env.ts().RunUntilIdle();  // fails at the tear
    (void)env.ts().Checkpoint();
    env.Crash();
    env.AdvanceTo(base + 2 * 3'600'000 + 5);
    env.CheckHistory(env.sent());
  }
}

TEST_P(TimerCrashTest, CommitLogTailLostDropsDanglingUnitsOnce) {
  TimerEnv env(GetParam());
  env.Open();
  int64_t base = env.clock().NowMs();
  std::vector<ScheduleResult> r;
  for (int i = 0; i < 10; ++i) r.push_back(env.Send("c" + std::to_string(i), base + 5000 + i));
  env.Run();
  ASSERT_TRUE(env.ts().Checkpoint().ok());  // TimerLog durable, pointing at all 10 records
  // The CommitLog loses its tail: records 5..9 vanish (e.g. a disk that lied about fsync).
  int64_t cut = r[5].put.physical_offset.value();
  env.CleanRestart();
  {
    // Shut everything, cut the segment file, reopen.
    std::string seg = env.mopts().dir + "/commitlog/00000000000000000000";
    ASSERT_TRUE(std::filesystem::exists(seg));
    std::filesystem::resize_file(seg, static_cast<uint64_t>(cut));
    // The store's own checkpoints would (rightly) refuse a log shorter than they recorded;
    // without them it recovers by scanning, as after losing the whole unsynced tail.
    for (const char* f : {"/commitlog/checkpoint", "/commitlog/clean_shutdown", "/checkpoint"}) {
      std::filesystem::remove(env.mopts().dir + f);
    }
  }
  env.Crash();
  env.AdvanceTo(base + 6000);
  env.AdvanceTo(base + 7000);  // nothing retried forever: a second pass finds no work
  std::map<std::string, int64_t> expect;
  for (int i = 0; i < 5; ++i) expect["c" + std::to_string(i)] = base + 5000 + i;
  env.CheckHistory(expect);
  EXPECT_EQ(env.ts().metrics().dropped.Value(), 5);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  // New messages after the loss reuse those offsets and are delivered normally.
  env.Send("new", base + 9000);
  env.AdvanceTo(base + 9000);
  EXPECT_EQ(env.Delivered().back().body, "new");
}

INSTANTIATE_TEST_SUITE_P(Precision, TimerCrashTest, ::testing::Values(1000, 100),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace tokimq::testing
