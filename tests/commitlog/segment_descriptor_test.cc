// CommitLog segments that are complete and flushed give their descriptors up (issue 25): the
// log holds descriptors for the active segment and those not yet flushed, not one per segment.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "commitlog/commit_log.h"
#include "test_util.h"

namespace tokimq {
namespace {

class CommitLogDescriptorTest : public ::testing::Test {
 protected:
  CommitLogOptions Options() {
    CommitLogOptions o;
    o.dir = dir_.Join("commitlog");
    o.segment_size = 4096;
    o.max_message_size = 2000;
    o.async_flush_interval_ms = 0;
    return o;
  }
  static Message Msg(int i) {
    Message m;
    m.topic = "t";
    m.queue_id = 0;
    m.queue_offset = QueueOffset(i);
    m.body.assign(300, static_cast<char>('a' + i % 26));
    return m;
  }
  void ExpectAllReadable(CommitLog* log, const std::vector<int64_t>& offsets) {
    for (size_t i = 0; i < offsets.size(); ++i) {
      auto m = log->Read(PhysicalOffset(offsets[i]));
      ASSERT_TRUE(m.ok()) << m.status();
      EXPECT_EQ(m->body, Msg(static_cast<int>(i)).body);
    }
  }

  testing::TempDir dir_;
  ManualClock clock_;
};

TEST_F(CommitLogDescriptorTest, FlushedSegmentsAreReadWithoutDescriptors) {
  std::vector<int64_t> offsets;
  {
    auto log = CommitLog::Open(FileSystem::Default(), &clock_, Options());
    ASSERT_TRUE(log.ok()) << log.status();
    for (int i = 0; i < 200; ++i) {  // ~340 bytes a record: 20 segments of 4 KiB
      Message m = Msg(i);
      auto off = (*log)->Append(&m);
      ASSERT_TRUE(off.ok()) << off.status();
      offsets.push_back(off->value());
      if (i % 10 == 9) {
        ASSERT_TRUE((*log)->Flush().ok());
      }
    }
    ASSERT_GE(offsets.back(), 15 * 4096);
    // The active segment and at most the one before it (not yet flushed at its roll). Before:
    // one per segment, 17 and more.
    EXPECT_LE(testing::OpenDescriptorsUnder(dir_.Join("commitlog/0")), 2);
    ExpectAllReadable(log->get(), offsets);
    ASSERT_TRUE((*log)->Close().ok());
  }
  auto log = CommitLog::Open(FileSystem::Default(), &clock_, Options());  // recovery
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_.Join("commitlog/0")), 1);
  ExpectAllReadable(log->get(), offsets);
  Message m = Msg(200);
  ASSERT_TRUE((*log)->Append(&m).ok());  // the active segment still takes appends
  ASSERT_TRUE((*log)->Flush().ok());
}

}  // namespace
}  // namespace tokimq
