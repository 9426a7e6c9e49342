// The ConsumeQueues of a MessageStore open their files through one bounded FileCache (issue 25):
// descriptors are bounded by max_open_files, not by the number of queues, and running out of
// descriptors fails the call that hit it, never the store.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "commitlog/consume_queue.h"
#include "commitlog/message_store.h"
#include "common/fault_injection_fs.h"
#include "test_util.h"

namespace tokimq {
namespace {

class ConsumeQueueFileCacheTest : public ::testing::Test {
 protected:
  static constexpr int kTopics = 10;
  static constexpr int kQueues = 4;

  MessageStoreOptions Options(size_t max_open_files) {
    MessageStoreOptions o;
    o.dir = dir_.path();
    o.commitlog.segment_size = 1 << 20;  // one CommitLog segment: one descriptor
    o.commitlog.max_message_size = 1024;
    o.commitlog.async_flush_interval_ms = 0;
    o.consume_queue_segment_entries = 16;  // 20 messages a queue: two files each
    o.checkpoint_interval_ms = 0;
    o.max_open_files = max_open_files;
    return o;
  }
  absl::StatusOr<std::unique_ptr<MessageStore>> Open(size_t max_open_files) {
    return MessageStore::Open(&fs_, &clock_, Options(max_open_files));
  }
  static std::string Topic(int t) { return "t" + std::to_string(t); }
  static Message Msg(const std::string& topic, int qid, int i) {
    Message m;
    m.topic = topic;
    m.queue_id = qid;
    m.body = topic + "/" + std::to_string(qid) + "#" + std::to_string(i);
    return m;
  }
  // Puts messages [from, to) into every queue of every topic.
  void PutAll(MessageStore* s, int from, int to) {
    for (int i = from; i < to; ++i) {
      for (int t = 0; t < kTopics; ++t) {
        for (int q = 0; q < kQueues; ++q) {
          auto r = s->Put(Msg(Topic(t), q, i));
          ASSERT_TRUE(r.ok()) << r.status();
          ASSERT_EQ(r->queue_offset.value(), i);
        }
      }
    }
  }
  // Every queue holds exactly messages 0..n-1, in order.
  void ExpectAll(MessageStore* s, int n) {
    for (int t = 0; t < kTopics; ++t) {
      for (int q = 0; q < kQueues; ++q) {
        ASSERT_EQ(s->MaxQueueOffset(Topic(t), q).value(), n);
        auto msgs = s->ReadQueue(Topic(t), q, QueueOffset(0), 1000);
        ASSERT_TRUE(msgs.ok()) << msgs.status();
        ASSERT_EQ(msgs->size(), static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) EXPECT_EQ((*msgs)[i].body, Msg(Topic(t), q, i).body);
      }
    }
  }

  testing::TempDir dir_;
  ManualClock clock_;
  FaultInjectionFileSystem fs_;
};

TEST_F(ConsumeQueueFileCacheTest, FortyQueuesKeepAtMostMaxOpenFilesOpen) {
  auto s = Open(4);
  ASSERT_TRUE(s.ok()) << s.status();
  PutAll(s->get(), 0, 20);
  ASSERT_TRUE((*s)->Flush().ok());  // writes and fsyncs 80 ConsumeQueue files
  ExpectAll(s->get(), 20);          // reads every one of them back
  // 4 ConsumeQueue files, the CommitLog segment and the checkpoint's syncfs descriptor on
  // consumequeue/ (before: one per file, 81).
  EXPECT_LE(fs_.open_files(), 4 + 1 + 1);
  EXPECT_EQ((*s)->file_cache()->stats().cached, 4u);
  EXPECT_GT((*s)->file_cache()->stats().evictions, 80u);
  ASSERT_TRUE((*s)->Close().ok());
}

TEST_F(ConsumeQueueFileCacheTest, RecoveryUnderADescriptorLimitEvictsAndRebuildsEveryQueue) {
  {
    auto s = Open(4);
    ASSERT_TRUE(s.ok()) << s.status();
    PutAll(s->get(), 0, 10);
    ASSERT_TRUE((*s)->Flush().ok());  // checkpoint: the first 10 of each queue are in files
    PutAll(s->get(), 10, 20);         // these only in the CommitLog: re-dispatched on recovery
    // Crash: no Close.
  }
  // Recovery reads, truncates and rewrites all 40 queues (80 files) with 2 cached files and a
  // descriptor limit of 8: the CommitLog segment, 2 cached, the syncfs descriptor, the
  // checkpoint file and directory handles. Holding a descriptor per ConsumeQueue file, it failed
  // with kResourceExhausted.
  fs_.SetOpenFileLimit(8);
  auto s = Open(2);
  ASSERT_TRUE(s.ok()) << s.status();
  ExpectAll(s->get(), 20);
  EXPECT_LE(fs_.open_files(), 2 + 1 + 1);  // + the syncfs descriptor
  PutAll(s->get(), 20, 21);  // and the queues continue where they were
  ExpectAll(s->get(), 21);
  ASSERT_TRUE((*s)->Close().ok());
}

TEST_F(ConsumeQueueFileCacheTest, FailedOpensFailTheCallNotTheStoreAndServiceResumes) {
  auto s = Open(4);
  ASSERT_TRUE(s.ok()) << s.status();
  PutAll(s->get(), 0, 10);
  fs_.SetFailOpen(true);  // out of descriptors
  // A queue never seen before needs a directory listing and a file: RESOURCE_EXHAUSTED.
  auto fresh = (*s)->Put(Msg("fresh", 0, 0));
  ASSERT_FALSE(fresh.ok());
  EXPECT_EQ(fresh.status().code(), absl::StatusCode::kResourceExhausted);
  // Flushing 40 queues through 4 cached files needs reopens: RESOURCE_EXHAUSTED, nothing lost.
  absl::Status flushed = (*s)->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kResourceExhausted) << flushed;
  fs_.SetFailOpen(false);  // descriptors are back
  auto again = (*s)->Put(Msg("fresh", 0, 0));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->queue_offset.value(), 0);
  PutAll(s->get(), 10, 20);
  ASSERT_TRUE((*s)->Flush().ok());
  ExpectAll(s->get(), 20);
  s->reset();  // crash after the flush: the queues' files hold everything
  auto reopened = Open(4);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  ExpectAll(reopened->get(), 20);
}

TEST_F(ConsumeQueueFileCacheTest, CommitLogRollWhileOutOfDescriptorsFailsThatPutOnly) {
  MessageStoreOptions o = Options(4);
  o.commitlog.segment_size = 4096;
  auto opened = MessageStore::Open(&fs_, &clock_, o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  MessageStore* s = opened->get();
  // Fill the first segment up to where the next record needs a new one.
  int i = 0;
  while (s->commit_log()->MaxOffset().value() + 200 < 4096) ASSERT_TRUE(s->Put(Msg("a", 0, i++)).ok());
  fs_.SetFailOpen(true);
  absl::Status failed;
  for (int k = 0; k < 3 && failed.ok(); ++k) failed = s->Put(Msg("a", 0, i++)).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  --i;  // the failed message got no queue offset
  fs_.SetFailOpen(false);
  // The log did not fail for good (before: "commit log failed" for every later put).
  auto r = s->Put(Msg("a", 0, i));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->queue_offset.value(), i);
  EXPECT_GE(r->physical_offset.value(), 4096);
  ASSERT_TRUE(s->Close().ok());
}

// A Sync that cannot reopen one of its files fails, and syncs nothing it did not report: the
// files it had handles for stay dirty too, so the next Sync makes every one durable (a power
// loss after it keeps every entry).
TEST_F(ConsumeQueueFileCacheTest, SyncThatCannotReopenAFileKeepsEveryFileDirty) {
  FileCache cache(&fs_, 1);
  const std::string dir = dir_.Join("q");
  {
    auto cq = ConsumeQueue::Open(&cache, dir, 8);
    ASSERT_TRUE(cq.ok()) << cq.status();
    for (int i = 0; i < 16; ++i) {
      ASSERT_TRUE((*cq)->Append({PhysicalOffset(int64_t{100} * i), 100, 0}).ok());
    }
    ASSERT_TRUE((*cq)->WriteBuffered().ok());  // two files; the cache keeps the second
    ASSERT_TRUE((*cq)->Get(QueueOffset(0)).ok());           // now the first, the second is evicted
    fs_.SetFailOpen(true);
    absl::Status s = (*cq)->Sync();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    fs_.SetFailOpen(false);
    ASSERT_TRUE((*cq)->Sync().ok());
  }
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());  // power loss
  auto cq = ConsumeQueue::Open(&cache, dir, 8);
  ASSERT_TRUE(cq.ok()) << cq.status();
  EXPECT_EQ((*cq)->MaxOffset(), QueueOffset(16));
  auto e = (*cq)->Get(QueueOffset(3));
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->physical_offset.value(), 300);
}

}  // namespace
}  // namespace tokimq
