// Repeated crashes: kill -9 or power loss, then again during or right
// after the recovery, at every step boundary of each session, then the history check: 0 lost,
// 0 early, 0 duplicates in the real topic, nothing left pending.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "timer_env.h"
#include "timerstore/timer_checkpoint.h"

namespace tokimq::testing {
namespace {

// 4 s window: at P = 1000 the wheel has 4 slots, so the workload's far messages roll (twice),
// and the window after a recovery (the dedup horizon) is short.
constexpr int64_t kWindowMs = 4'000;
constexpr int64_t kDeliverStepMs = 450;  // one "deliver some" step
constexpr int64_t kRestartMs = 130;      // clock time a restart takes

enum class Step { kRun, kCheckpoint, kDeliverSome, kAck, kSendMore };
// What a broker does between two crashes, in order; a crash can come after any prefix.
// (Each scenario costs a few fsyncs per step; the matrices below run ~80 scenarios each.)
constexpr Step kSession[] = {Step::kRun,      Step::kCheckpoint, Step::kDeliverSome,
                             Step::kAck,      Step::kCheckpoint, Step::kDeliverSome,
                             Step::kSendMore, Step::kDeliverSome};
constexpr int kSessionSteps = static_cast<int>(std::size(kSession));

enum class CrashKind { kKill, kPowerLoss };

const char* Name(CrashKind k) { return k == CrashKind::kKill ? "kill" : "power loss"; }

struct CrashAt {
  int steps = 0;  // steps of kSession done before the crash (0: right after recovery)
  CrashKind kind = CrashKind::kKill;
};

class TimerRepeatedCrashTest : public ::testing::TestWithParam<int64_t> {
 protected:
  // Acknowledged (flushed) workload: 40 messages over ~3.4 s, two that roll, more per kSendMore.
  void SendWorkload(TimerEnv& env) {
    const int64_t base = env.clock().NowMs();
    for (int i = 0; i < 40; ++i) env.Send("w" + std::to_string(i), base + 150 + i * 83);
    env.Send("roll1", base + 9'000);
    env.Send("roll2", base + 13'003);
    env.Ack();
  }

  void DoStep(TimerEnv& env, Step step, int* sends) {
    switch (step) {
      case Step::kRun:
        env.Run();
        break;
      case Step::kCheckpoint:
        ASSERT_TRUE(env.ts().Checkpoint().ok());
        break;
      case Step::kDeliverSome:
        env.AdvanceTo(env.clock().NowMs() + kDeliverStepMs);
        break;
      case Step::kAck:
        env.Ack();
        break;
      case Step::kSendMore: {
        const int64_t now = env.clock().NowMs();
        for (int j = 0; j < 10; ++j) {
          env.Send("s" + std::to_string(*sends) + "_" + std::to_string(j), now + 100 + j * 90);
        }
        env.Send("s" + std::to_string(*sends) + "_far", now + 6'000);
        env.Ack();
        ++*sends;
        break;
      }
    }
  }

  void CrashNow(TimerEnv& env, CrashKind kind) {
    env.clock().AdvanceMs(kRestartMs);
    if (kind == CrashKind::kKill) {
      env.Kill();
    } else {
      env.Crash();
    }
  }

  // Session 1 runs `crashes[0].steps` steps and crashes, the recovered store runs
  // `crashes[1].steps` and crashes, ...; the last recovered store runs until every message is
  // due, and the history must be exact.
  void RunPairMatrix(CrashKind first, CrashKind second);
  void RunScenario(const std::vector<CrashAt>& crashes) {
    TimerEnv env(GetParam(), kWindowMs);
    env.Open();
    const int64_t base = env.clock().NowMs();
    SendWorkload(env);
    int sends = 0;
    for (const CrashAt& c : crashes) {
      for (int i = 0; i < c.steps; ++i) {
        DoStep(env, kSession[i], &sends);
        if (::testing::Test::HasFatalFailure()) return;
      }
      CrashNow(env, c.kind);
      if (::testing::Test::HasFatalFailure()) return;
    }
    const int64_t end = std::max(base + 14'000, env.clock().NowMs() + 7'000);
    for (int64_t t = env.clock().NowMs(); t < end; t += 250) env.AdvanceTo(t);
    env.AdvanceTo(end + 1'000);
    env.CheckHistory(env.sent());
    EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  }
};

// The defect as reported: moves done before the first crash, then a checkpoint of the
// recovered store before its read tick has passed them (same read tick), then a second crash.
// The second recovery must still know those moves.
TEST_P(TimerRepeatedCrashTest, CheckpointAfterRecoveryKeepsEarlierMovesKnown) {
  TimerEnv env(GetParam(), kWindowMs);
  env.Open();
  const int64_t base = env.clock().NowMs();
  for (int i = 0; i < 20; ++i) env.Send("m" + std::to_string(i), base + 1'000 + i * 40);
  env.Ack();
  env.Run();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  env.AdvanceTo(base + 1'000 + 10 * 40);  // 11 of 20 moved
  ASSERT_EQ(env.Delivered().size(), 11u);
  env.Ack();
  env.Kill();
  env.Run();  // the recovered store walks the slot again (no clock advance: nothing more due)
  ASSERT_EQ(env.Delivered().size(), 11u);
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  env.Kill();
  env.AdvanceTo(base + 5'000);
  env.CheckHistory(env.sent());
  EXPECT_EQ(env.Delivered().size(), 20u);
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

// The recovered store's checkpoints keep the first recovery's CommitLog scan start while its
// dedup knowledge is needed, and move on once the read tick has passed the slots walked before
// the crash (seconds, not a wheel window: a 7-day-old scan start would make every later restart
// read days of CommitLog).
TEST_P(TimerRepeatedCrashTest, RecoveredScanStartHeldUntilTheCrashedSlotsArePassed) {
  TimerEnv env(GetParam(), 3'600'000);
  env.Open();
  const int64_t base = env.clock().NowMs();
  for (int i = 0; i < 20; ++i) env.Send("m" + std::to_string(i), base + 1'000 + i * 40);
  env.Ack();
  env.Run();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  const std::string path = env.topts().dir + "/checkpoint";
  auto c0 = LoadTimerCheckpoint(&env.fs(), path);
  ASSERT_TRUE(c0.ok()) << c0.status();
  env.AdvanceTo(base + 1'000 + 10 * 40);
  env.Ack();
  env.Kill();
  env.Run();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  auto c1 = LoadTimerCheckpoint(&env.fs(), path);
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_EQ(c1->commitlog_scan_from, c0->commitlog_scan_from);
  EXPECT_EQ(c1->timerlog_scan_from, c0->timerlog_scan_from);
  env.AdvanceTo(base + 5'000);  // everything moved, a few ticks past the crashed slots
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  auto c2 = LoadTimerCheckpoint(&env.fs(), path);
  ASSERT_TRUE(c2.ok()) << c2.status();
  EXPECT_GT(c2->read_tick, c0->read_tick);
  EXPECT_EQ(c2->commitlog_scan_from, env.ms().commit_log()->MaxOffset());
  EXPECT_GT(c2->commitlog_scan_from, c0->commitlog_scan_from);
  env.CheckHistory(env.sent());
}

// Same, with the recovered store checkpointing before it walked anything (a checkpoint thread
// that runs first after a restart).
TEST_P(TimerRepeatedCrashTest, CheckpointRightAfterRecoveryKeepsEarlierMovesKnown) {
  TimerEnv env(GetParam(), kWindowMs);
  env.Open();
  const int64_t base = env.clock().NowMs();
  for (int i = 0; i < 20; ++i) env.Send("m" + std::to_string(i), base + 1'000 + i * 40);
  env.Ack();
  env.Run();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  env.AdvanceTo(base + 1'000 + 10 * 40);
  env.Ack();
  env.Kill();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  env.Kill();
  env.AdvanceTo(base + 5'000);
  env.CheckHistory(env.sent());
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

// A roll continuation written before the first crash: the recovered store checkpoints before
// its read tick passes the roll's slot; after the second crash the roll must not be re-linked
// a second time (that would deliver the message twice).
TEST_P(TimerRepeatedCrashTest, CheckpointAfterRecoveryKeepsRollContinuationsKnown) {
  TimerEnv env(GetParam(), kWindowMs);
  env.Open();
  const int64_t base = env.clock().NowMs();
  env.Send("far", base + 9'000);
  env.Send("near", base + 3'500);
  env.Ack();
  env.Run();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  env.AdvanceTo(base + 4'200);  // the roll unit's slot walked, its continuation linked
  ASSERT_GE(env.ts().metrics().rolled.Value(), 1);
  env.Ack();
  env.Kill();
  ASSERT_TRUE(env.ts().Checkpoint().ok());
  env.Kill();
  env.AdvanceTo(base + 15'000);
  env.CheckHistory(env.sent());
  EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
}

// Runs the scenario {crash `first` after a steps, crash `second` after b steps} for every pair
// (a, b) of step boundaries, stopping at the first failure.
void TimerRepeatedCrashTest::RunPairMatrix(CrashKind first, CrashKind second) {
  for (int a = 0; a <= kSessionSteps; ++a) {
    for (int b = 0; b <= kSessionSteps; ++b) {
      SCOPED_TRACE(::testing::Message()
                   << Name(first) << " after " << a << ", then " << Name(second) << " after " << b);
      RunScenario({{a, first}, {b, second}});
      if (HasFailure()) return;
    }
  }
}

// Two crashes within a session's length of each other, at every pair of step boundaries
// (including right after recovery), both kill -9.
TEST_P(TimerRepeatedCrashTest, TwoKillsAtEveryPairOfStepBoundaries) {
  RunPairMatrix(CrashKind::kKill, CrashKind::kKill);
}

TEST_P(TimerRepeatedCrashTest, TwoPowerLossesAtEveryPairOfStepBoundaries) {
  // At P = 1000 only (fsync-bound: ~80 scenarios); the kill matrix runs at both precisions.
  if (GetParam() != 1000) GTEST_SKIP() << "runs at P = 1000";
  RunPairMatrix(CrashKind::kPowerLoss, CrashKind::kPowerLoss);
}

TEST_P(TimerRepeatedCrashTest, KillThenPowerLossAtEveryPairOfStepBoundaries) {
  // At P = 1000 only (fsync-bound: ~80 scenarios); the kill matrix runs at both precisions.
  if (GetParam() != 1000) GTEST_SKIP() << "runs at P = 1000";
  RunPairMatrix(CrashKind::kKill, CrashKind::kPowerLoss);
}

// Three crashes, the middle one right after recovery (before the recovered store did
// anything), the others at every step boundary.
TEST_P(TimerRepeatedCrashTest, ThreeCrashesWithOneRightAfterRecovery) {
  // At P = 1000 only (fsync-bound: ~80 scenarios); the kill matrix runs at both precisions.
  if (GetParam() != 1000) GTEST_SKIP() << "runs at P = 1000";
  for (int a = 0; a <= kSessionSteps; ++a) {
    for (int c = 0; c <= kSessionSteps; ++c) {
      SCOPED_TRACE(::testing::Message() << "kill after " << a << ", 0, then " << c);
      RunScenario({{a, CrashKind::kKill}, {0, CrashKind::kKill}, {c, CrashKind::kKill}});
      if (HasFailure()) return;
    }
  }
}

// A crash in the middle of the recovery's own writes (CommitLog / TimerLog truncation, queue
// re-dispatch, the store checkpoints), at points spread over them, then another crash.
TEST_P(TimerRepeatedCrashTest, CrashDuringRecoveryThenAgain) {
  // Learn how many bytes a recovery writes after a mid-delivery power loss.
  auto prepare = [](TimerEnv& env, int64_t base) {
    for (int i = 0; i < 30; ++i) env.Send("r" + std::to_string(i), base + 300 + i * 61);
    env.Ack();
    env.Run();
    ASSERT_TRUE(env.ts().Checkpoint().ok());
    env.AdvanceTo(base + 300 + 15 * 61);
    env.Ack();
    env.AdvanceTo(base + 300 + 22 * 61);  // moves 16..22 not durable
  };
  uint64_t span = 0;
  {
    TimerEnv env(GetParam(), kWindowMs);
    env.Open();
    prepare(env, env.clock().NowMs());
    if (HasFatalFailure()) return;
    const uint64_t before = env.fs().bytes_written();
    env.Crash();
    span = env.fs().bytes_written() - before;
  }
  ASSERT_GT(span, 0u);
  for (uint64_t cut = 0; cut <= span; cut += std::max<uint64_t>(1, span / 20)) {
    SCOPED_TRACE(cut);
    TimerEnv env(GetParam(), kWindowMs);
    env.Open();
    const int64_t base = env.clock().NowMs();
    prepare(env, base);
    if (HasFatalFailure()) return;
    env.fs().TearAfterBytes(cut);
    // Power loss, then a recovery that dies at the tear (its Open may fail or succeed).
    {
      env.clock().AdvanceMs(kRestartMs);
      env.CloseForCrash();
      ASSERT_TRUE(env.fs().DropUnsyncedData().ok());
      (void)env.TryOpen();
    }
    env.fs().ClearFaults();
    env.Crash();  // power loss again: only what the torn recovery synced stays
    env.Run();
    env.Kill();  // and a kill right after the good recovery
    env.AdvanceTo(base + 6'000);
    env.CheckHistory(env.sent());
    EXPECT_EQ(env.ts().metrics().pending.Value(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Precision, TimerRepeatedCrashTest, ::testing::Values(1000, 100),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace tokimq::testing
