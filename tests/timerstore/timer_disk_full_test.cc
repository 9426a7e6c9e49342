// A full disk under the timer: releases that cannot be written wait and go
// out once space returns, exactly once and never early; TimerLog units whose write-out failed
// stay appended (no second copy) and land at their own positions.
#include <gtest/gtest.h>

#include <string>

#include "timer_env.h"
#include "timerstore/timer_log.h"

namespace tokimq::testing {
namespace {

class TimerDiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override { env_.Open(); }
  TimerEnv env_{100};
};

TEST_F(TimerDiskFullTest, DueMessagesWaitOutAFullDiskAndAreDeliveredOnceWhenSpaceReturns) {
  const int64_t now = env_.clock().NowMs();
  for (int i = 0; i < 50; ++i) env_.Send("m" + std::to_string(i), now + 100 + i * 37);
  env_.Ack();
  env_.Run();  // linked into the wheel
  env_.fs().SetNoSpace(true);
  env_.clock().SetMs(now + 5000);
  absl::Status s = env_.ts().RunUntilIdle();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(env_.Delivered().empty());
  // The dequeue steps back off (10 ms doubling to 1 s, on the store's clock) after a transient
  // error: at the same instant nothing is tried again.
  s = env_.ts().RunUntilIdle();
  EXPECT_TRUE(s.ok()) << s;
  env_.clock().SetMs(now + 6000);
  s = env_.ts().RunUntilIdle();  // still full: still waiting, nothing half-written
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(env_.Delivered().empty());

  env_.fs().ClearFaults();  // space freed: no restart needed
  env_.AdvanceTo(now + 7000);  // past the longest backoff
  env_.CheckHistory(env_.sent());
  EXPECT_EQ(env_.ts().metrics().delivered.Value(), 50);
  EXPECT_EQ(env_.ts().metrics().pending.Value(), 0);

  ASSERT_TRUE(env_.ts().Checkpoint().ok());
  env_.Crash();
  env_.AdvanceTo(now + 10'000);
  env_.CheckHistory(env_.sent());
}

TEST_F(TimerDiskFullTest, SendsRefusedWhileFullAreNotStoredAndLaterSendsAre) {
  const int64_t now = env_.clock().NowMs();
  env_.Send("before", now + 200);
  env_.Ack();
  env_.fs().SetNoSpace(true);
  Message m;
  m.topic = "t";
  m.body = "refused";
  m.properties[prop::kMessageId] = "refused";
  EXPECT_EQ(env_.ts().Schedule(std::move(m), now + 300).status().code(),
            absl::StatusCode::kResourceExhausted);
  env_.fs().ClearFaults();
  env_.Send("after", now + 400);
  env_.Ack();
  env_.AdvanceTo(now + 1000);
  env_.CheckHistory(env_.sent());  // "refused" nowhere
  env_.Crash();
  env_.AdvanceTo(now + 2000);
  env_.CheckHistory(env_.sent());
}

class TimerLogDiskFullTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kSegment = 64 * kTimerUnitSize;
  std::unique_ptr<TimerLog> Open() {
    auto log = TimerLog::Open(&fs_, tmp_.Join("timerlog"), kSegment);
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? std::move(*log) : nullptr;
  }
  static TimerUnit Unit(int i) {
    TimerUnit u;
    u.deliver_ms = 1000 + i;
    u.physical_offset = PhysicalOffset(i);
    u.slot_tick = i / 10;
    return u;
  }
  // Every unit 0..n-1 at its own position, and nothing after them.
  void ExpectUnits(const TimerLog& log, int n) {
    EXPECT_EQ(log.WritePos(), TimerLogPosition(n * kTimerUnitSize));
    for (int i = 0; i < n; ++i) {
      auto u = log.Read(TimerLogPosition(i * kTimerUnitSize));
      ASSERT_TRUE(u.ok()) << i << ": " << u.status();
      ASSERT_EQ(u->physical_offset, PhysicalOffset(i));
    }
  }

  TempDir tmp_;
  FaultInjectionFileSystem fs_;
};

// Appends past the 64 KiB write-out point while nothing can be written: each unit is appended
// once (the caller gets no error for a unit already buffered, so it does not append it again).
TEST_F(TimerLogDiskFullTest, AppendKeepsUnitsWhoseWriteOutFailsAndWritesThemLater) {
  auto log = Open();
  fs_.SetNoSpace(true);
  for (int i = 0; i < 1200; ++i) {
    auto pos = log->Append(Unit(i));
    ASSERT_TRUE(pos.ok()) << i << ": " << pos.status();
    ASSERT_EQ(*pos, TimerLogPosition(i * kTimerUnitSize));
  }
  EXPECT_EQ(log->Flush().code(), absl::StatusCode::kResourceExhausted);
  ExpectUnits(*log, 1200);
  fs_.ClearFaults();
  ASSERT_TRUE(log->Flush().ok());
  log.reset();
  log = Open();
  ExpectUnits(*log, 1200);
}

// The disk fills in the middle of a write-out that spans segments: the part written leaves the
// buffer, the rest is written at its own positions later (not again from the buffer's start at
// the advanced position, which would shift every later unit).
TEST_F(TimerLogDiskFullTest, WriteOutThatFillsTheDiskMidwayResumesAtTheRightPosition) {
  auto log = Open();
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(log->Append(Unit(i)).ok());
  fs_.NoSpaceAfterBytes(2 * kSegment + 5 * kTimerUnitSize + 10);
  EXPECT_EQ(log->Flush().code(), absl::StatusCode::kResourceExhausted);
  ExpectUnits(*log, 300);
  fs_.ClearFaults();
  ASSERT_TRUE(log->Flush().ok());
  ExpectUnits(*log, 300);
  log.reset();
  log = Open();
  ExpectUnits(*log, 300);
}

}  // namespace
}  // namespace tokimq::testing
