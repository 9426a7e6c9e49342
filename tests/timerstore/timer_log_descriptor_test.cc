// TimerLog segments fsynced to their end give their descriptors up (issue 25): a TimerLog is
// never trimmed while open, so one descriptor per segment grew with every delayed message ever
// scheduled.
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"
#include "timerstore/timer_log.h"

namespace tokimq {
namespace {

TimerUnit Unit(int i) {
  TimerUnit u;
  u.deliver_ms = 1000 + i;
  u.physical_offset = PhysicalOffset(100 * i);
  u.msg_size = 100;
  return u;
}

TEST(TimerLogDescriptorTest, FlushedSegmentsAreReadWithoutDescriptors) {
  testing::TempDir tmp;
  const std::string dir = tmp.Join("timerlog");
  std::vector<TimerLogPosition> pos;
  {
    auto log = TimerLog::Open(FileSystem::Default(), dir, 4 * kTimerUnitSize);
    ASSERT_TRUE(log.ok()) << log.status();
    for (int i = 0; i < 80; ++i) {  // 20 segments of 4 units
      auto p = (*log)->Append(Unit(i));
      ASSERT_TRUE(p.ok()) << p.status();
      pos.push_back(*p);
      if (i % 3 == 2) {
        ASSERT_TRUE((*log)->Flush().ok());
      }
    }
    ASSERT_TRUE((*log)->Flush().ok());
    // The last segment only (before: one per segment, 20).
    EXPECT_EQ(testing::OpenDescriptorsUnder(dir + "/"), 1);
    for (int i = 0; i < 80; ++i) {
      auto u = (*log)->Read(pos[i]);
      ASSERT_TRUE(u.ok()) << u.status();
      EXPECT_EQ(u->physical_offset, PhysicalOffset(100 * i));
    }
  }
  auto log = TimerLog::Open(FileSystem::Default(), dir, 4 * kTimerUnitSize);  // recovery reads all
  ASSERT_TRUE(log.ok()) << log.status();
  auto u = (*log)->Read(pos[5]);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->physical_offset, PhysicalOffset(500));
}

}  // namespace
}  // namespace tokimq
