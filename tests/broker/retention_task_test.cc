// RetentionTask (broker/src/retention_task.h) on a real MessageStore + TimerStore with a
// ManualClock; passes are run by hand (RunOnce), never by waiting. Timer case 8: a one-hour
// retention and a message delayed by two days, which is moved forward by every pass (issue 24)
// and still delivered once, at its millisecond.
#include "retention_task.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/file.h"
#include "test_util.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker {
namespace {

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 24 * kHour;

class RetentionTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MessageStoreOptions mo;
    mo.dir = dir_.Join("store");
    mo.commitlog.segment_size = 1 << 20;
    mo.checkpoint_interval_ms = 0;
    auto ms = MessageStore::Open(FileSystem::Default(), &clock_, mo);
    ASSERT_TRUE(ms.ok()) << ms.status();
    store_ = std::move(*ms);
    TimerStoreOptions to;
    to.dir = dir_.Join("timer");
    to.precision_ms = 1000;
    to.window_ms = kHour;  // a two-day delay rolls: the roll must keep the pin too
    auto ts = TimerStore::Open(FileSystem::Default(), &clock_, store_.get(), to);
    ASSERT_TRUE(ts.ok()) << ts.status();
    timers_ = std::move(*ts);
    task_ = std::make_unique<RetentionTask>(&clock_, store_.get(), /*interval_ms=*/0,
                                            [this] { return age_ms_; });
  }
  void TearDown() override {
    task_.reset();
    timers_.reset();
    if (store_) {
      EXPECT_TRUE(store_->Close().ok());
    }
  }
  void PutFill(int n) {
    for (int i = 0; i < n; ++i) {
      Message m;
      m.topic = "fill";
      m.queue_id = 0;
      m.body = std::string(100'000, 'f');
      ASSERT_TRUE(store_->Put(std::move(m)).ok());
    }
  }
  void AdvanceMs(int64_t ms) {
    clock_.AdvanceMs(ms);
    ASSERT_TRUE(timers_->RunUntilIdle().ok());
  }
  int Run() {
    auto n = task_->RunOnce();
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }

  tokimq::testing::TempDir dir_;
  ManualClock clock_{1'700'000'000'123};
  int64_t age_ms_ = kHour;
  std::unique_ptr<MessageStore> store_;
  std::unique_ptr<TimerStore> timers_;
  std::unique_ptr<RetentionTask> task_;
};

TEST_F(RetentionTaskTest, MessageDelayedBeyondRetentionIsMovedAndDelivered) {
  PutFill(50);
  Message later;
  later.topic = "t";
  later.queue_id = 0;
  later.body = "two days later";
  const int64_t deliver = clock_.NowMs() + 2 * kDay;
  auto scheduled = timers_->Schedule(later, deliver);
  ASSERT_TRUE(scheduled.ok()) << scheduled.status();
  const int64_t first_at = scheduled->put.physical_offset.value();
  PutFill(20);
  ASSERT_TRUE(timers_->RunUntilIdle().ok());

  EXPECT_EQ(Run(), 0);  // nothing is an hour old yet
  EXPECT_EQ(store_->commit_log()->MinOffset().value(), 0);

  // Each pass finds the message in an expired segment, copies it to the head (a few hundred
  // bytes) and deletes everything expired: the long delay no longer pins the segments.
  for (int64_t moved = 0; moved + kHour < 2 * kDay; moved += kHour) {
    AdvanceMs(kHour);
    PutFill(11);  // > 1 MiB: the previous head segment is no longer the active one
    Run();
    EXPECT_EQ(timers_->metrics().pinned_bytes.Value(), 0) << "after " << moved + kHour << " ms";
  }
  EXPECT_GT(store_->commit_log()->MinOffset().value(), first_at);
  // Moved only when its segment is due: with 1.1 MB an hour in 1 MiB segments and a one-hour
  // age, every third pass (a segment is due when the next one's first record is over an hour
  // old).
  EXPECT_GE(timers_->metrics().moved.Value(), 15);
  EXPECT_LE(timers_->metrics().moved.Value(), 24);
  EXPECT_GT(task_->deleted_segments(), 40);
  EXPECT_GT(store_->MinQueueOffset("fill", 0).value(), 0);
  EXPECT_EQ(store_->MaxQueueOffset("t", 0).value(), 0);

  clock_.SetMs(deliver);
  ASSERT_TRUE(timers_->RunUntilIdle().ok());
  auto got = store_->ReadQueue("t", 0, QueueOffset(0), 10);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].body, "two days later");
  EXPECT_EQ((*got)[0].store_ms, deliver);
  EXPECT_EQ(timers_->metrics().dropped.Value(), 0);
  EXPECT_EQ(timers_->metrics().pending.Value(), 0);

  AdvanceMs(2 * kHour);
  PutFill(11);
  EXPECT_GT(Run(), 0);
  EXPECT_EQ(task_->runs(), 49);
  EXPECT_EQ(task_->last_run_ms(), clock_.NowMs());
}

TEST_F(RetentionTaskTest, NonPositiveAgeDeletesNothing) {
  PutFill(30);
  clock_.AdvanceMs(30 * kDay);
  age_ms_ = 0;
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(store_->commit_log()->MinOffset().value(), 0);
  EXPECT_EQ(task_->last_age_ms(), 0);
  age_ms_ = kDay;
  EXPECT_GT(Run(), 0);
  EXPECT_GT(store_->commit_log()->MinOffset().value(), 0);
  EXPECT_EQ(task_->last_age_ms(), kDay);
}

// Regression test for a ConsumeQueue bug (commitlog/src/consume_queue.cc, FileForLocked used
// to do "min_ = min_valid_ = first" for the first file): a queue whose entries are all still
// buffered (fewer than kWriteBatch, no file yet) when retention advances its valid minimum got
// that minimum reset to the file's first offset when the file was created at the next flush,
// so MinQueueOffset (Stats, a new group's start) was wrong until the next retention pass.
TEST_F(RetentionTaskTest, QueueMinimumSurvivesTheFirstFileWrite) {
  PutFill(30);  // three 1 MiB segments; 30 entries stay buffered in the queue
  clock_.AdvanceMs(2 * kHour);
  EXPECT_EQ(Run(), 2);
  const QueueOffset min = store_->MinQueueOffset("fill", 0);
  EXPECT_EQ(min, QueueOffset(20));
  ASSERT_TRUE(store_->Flush().ok());
  EXPECT_EQ(store_->MinQueueOffset("fill", 0), min);
}

}  // namespace
}  // namespace tokimq::broker
