// MessageStore checkpoints make new ConsumeQueue files and directories durable with one syncfs
// when there are many (issue 25: ~3 fsyncs per new queue made a 10,000-topic broker's first
// checkpoint take 355 s), never claim what is not durable, and free idle cached files when a
// directory listing or a directory fsync runs out of descriptors.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "commitlog/consume_queue.h"
#include "commitlog/message_store.h"
#include "common/fault_injection_fs.h"
#include "test_util.h"

namespace tokimq {
namespace {

class CheckpointSyncTest : public ::testing::Test {
 protected:
  static constexpr int kTopics = 10;
  static constexpr int kQueues = 4;

  MessageStoreOptions Options() {
    MessageStoreOptions o;
    o.dir = dir_.path();
    o.commitlog.segment_size = 1 << 20;
    o.commitlog.max_message_size = 1024;
    o.commitlog.async_flush_interval_ms = 0;
    o.consume_queue_segment_entries = 16;
    o.checkpoint_interval_ms = 0;
    return o;
  }
  std::unique_ptr<MessageStore> Open(MessageStoreOptions o) {
    auto s = MessageStore::Open(&fs_, &clock_, std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  static std::string Topic(int t) { return "t" + std::to_string(t); }
  static Message Msg(const std::string& topic, int qid) {
    Message m;
    m.topic = topic;
    m.queue_id = qid;
    m.body = topic + "/" + std::to_string(qid);
    return m;
  }
  // One message into each of `topics` x kQueues new queues.
  void PutOneEach(MessageStore* s, int topics) {
    for (int t = 0; t < topics; ++t) {
      for (int q = 0; q < kQueues; ++q) ASSERT_TRUE(s->Put(Msg(Topic(t), q)).ok());
    }
  }
  // After a power loss: the queue files alone (no CommitLog rescan) hold one entry per queue.
  void ExpectQueueFilesHoldOneEach(int topics) {
    for (int t = 0; t < topics; ++t) {
      for (int q = 0; q < kQueues; ++q) {
        const std::string dir = dir_.Join("consumequeue/" + Topic(t) + "/" + std::to_string(q));
        auto cq = ConsumeQueue::Open(&fs_, dir, 16);
        ASSERT_TRUE(cq.ok()) << cq.status();
        EXPECT_EQ((*cq)->MaxOffset(), QueueOffset(1)) << dir;
      }
    }
  }

  testing::TempDir dir_;
  ManualClock clock_;
  FaultInjectionFileSystem fs_;
};

TEST_F(CheckpointSyncTest, ManyNewQueuesAreMadeDurableByOneSyncfs) {
  auto s = Open(Options());
  ASSERT_NE(s, nullptr);
  PutOneEach(s.get(), kTopics);  // 40 new queue files, 40 queue and 10 topic directories
  const int syncs = fs_.sync_count(), dir_syncs = fs_.dir_sync_count();
  ASSERT_TRUE(s->Flush().ok());
  EXPECT_EQ(fs_.syncfs_count(), 1);
  // The checkpoint file's own directory only (before: 40 + 10 + 1 directory fsyncs).
  EXPECT_EQ(fs_.dir_sync_count() - dir_syncs, 1);
  // CommitLog fdatasync, syncfs, checkpoint file and its directory (before: 40 more file syncs).
  EXPECT_LE(fs_.sync_count() - syncs, 4);
  s.reset();  // power loss right after the checkpoint
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  ExpectQueueFilesHoldOneEach(kTopics);
}

TEST_F(CheckpointSyncTest, AFewChangesAreFsyncedOneByOne) {
  auto s = Open(Options());
  ASSERT_NE(s, nullptr);
  PutOneEach(s.get(), 1);  // 4 files + 4 directories + 2 parents: below 64
  const int dir_syncs = fs_.dir_sync_count();
  ASSERT_TRUE(s->Flush().ok());
  EXPECT_EQ(fs_.syncfs_count(), 0);
  EXPECT_EQ(fs_.dir_sync_count() - dir_syncs, 4 + 2 + 1);  // queues, topic + root, checkpoint
  s.reset();
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  ExpectQueueFilesHoldOneEach(1);
}

// Issue 21 item 1: a checkpoint fsyncs only the queue files written since the last one, and
// does not rewrite the checkpoint file (a file and a directory fsync) when the dispatch offset
// it holds is unchanged: an idle store makes no fsync.
TEST_F(CheckpointSyncTest, CheckpointFsyncsOnlyFilesWrittenSinceTheLastOne) {
  auto s = Open(Options());
  ASSERT_NE(s, nullptr);
  PutOneEach(s.get(), 1);
  ASSERT_TRUE(s->Flush().ok());
  int syncs = fs_.sync_count();
  ASSERT_TRUE(s->Flush().ok());
  EXPECT_EQ(fs_.sync_count() - syncs, 0) << "an unchanged store fsynced";
  ASSERT_TRUE(s->Put(Msg(Topic(0), 2)).ok());  // one queue file changes
  syncs = fs_.sync_count();
  const int dir_syncs = fs_.dir_sync_count();
  ASSERT_TRUE(s->Flush().ok());
  // CommitLog fdatasync, queue 2's file, checkpoint file and its directory.
  EXPECT_EQ(fs_.sync_count() - syncs, 4);
  EXPECT_EQ(fs_.dir_sync_count() - dir_syncs, 1);
  s.reset();  // power loss: the checkpoint and the queue files agree
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  auto reopened = Open(Options());
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->MaxQueueOffset(Topic(0), 2).value(), 2);
  EXPECT_EQ(reopened->MaxQueueOffset(Topic(0), 1).value(), 1);
}

TEST_F(CheckpointSyncTest, SyncfsErrorFallsBackToAnFsyncPerFileAndDirectory) {
  auto s = Open(Options());
  ASSERT_NE(s, nullptr);
  PutOneEach(s.get(), kTopics);
  fs_.SetFailSyncfs(true);  // some other file's writeback failed
  const int dir_syncs = fs_.dir_sync_count();
  ASSERT_TRUE(s->Flush().ok());
  EXPECT_EQ(fs_.syncfs_count(), 0);
  EXPECT_EQ(fs_.dir_sync_count() - dir_syncs, 40 + 10 + 1 + 1);
  s.reset();
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  ExpectQueueFilesHoldOneEach(kTopics);
}

// A checkpoint that failed returns every mark it took: the next one makes all of them durable.
TEST_F(CheckpointSyncTest, FailedCheckpointLeavesEveryQueueDirtyForTheNext) {
  auto o = Options();
  o.max_open_files = 4;
  o.checkpoint_syncfs_above = std::numeric_limits<size_t>::max();  // one by one
  auto s = Open(o);
  ASSERT_NE(s, nullptr);
  PutOneEach(s.get(), kTopics);
  fs_.SetFailOpen(true);  // 40 files through 4 cached handles: reopens fail
  EXPECT_EQ(s->Flush().code(), absl::StatusCode::kResourceExhausted);
  fs_.SetFailOpen(false);
  ASSERT_TRUE(s->Flush().ok());
  s.reset();
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  ExpectQueueFilesHoldOneEach(kTopics);
}

// With every descriptor taken (the cache's idle files and the rest of the process), a new
// queue's directory listing and a checkpoint's directory fsyncs close idle cached files and
// succeed. Before, both answered RESOURCE_EXHAUSTED until something else closed a descriptor.
TEST_F(CheckpointSyncTest, DirectoryListAndFsyncFreeIdleCachedFilesWhenOutOfDescriptors) {
  auto o = Options();
  o.max_open_files = 4;
  o.checkpoint_syncfs_above = std::numeric_limits<size_t>::max();  // SyncDir per directory
  auto s = Open(o);
  ASSERT_NE(s, nullptr);
  PutOneEach(s.get(), kTopics);
  ASSERT_TRUE(s->Flush().ok());
  ASSERT_EQ(s->file_cache()->stats().cached, 4u);
  fs_.SetOpenFileLimit(fs_.open_files());  // no descriptor left
  auto fresh = s->Put(Msg("fresh", 0));    // ListDir of the new queue's directory
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::Status flushed = s->Flush();  // new file, directory, topic and root directory fsyncs
  EXPECT_TRUE(flushed.ok()) << flushed;
  fs_.ClearFaults();
  s.reset();
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  auto cq = ConsumeQueue::Open(&fs_, dir_.Join("consumequeue/fresh/0"), 16);
  ASSERT_TRUE(cq.ok()) << cq.status();
  EXPECT_EQ((*cq)->MaxOffset(), QueueOffset(1));
}

class ConsumeQueueSyncTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  FaultInjectionFileSystem fs_;
};

// After a failed fsync the kernel may have dropped the dirty pages: a retry that succeeds would
// let a checkpoint claim lost entries, so the queue's syncs keep failing (until a restart
// rebuilds it from the CommitLog). Before, the second Sync returned OK.
TEST_F(ConsumeQueueSyncTest, FailedFsyncFailsEveryLaterSync) {
  auto cq = ConsumeQueue::Open(&fs_, dir_.Join("q"), 8);
  ASSERT_TRUE(cq.ok()) << cq.status();
  ASSERT_TRUE((*cq)->Append({PhysicalOffset(100), 100, 0}).ok());
  fs_.SetFailSync(true);
  absl::Status first = (*cq)->Sync();
  EXPECT_FALSE(first.ok());
  fs_.SetFailSync(false);
  absl::Status again = (*cq)->Sync();
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(again.message(), first.message());
  EXPECT_FALSE((*cq)->TakeDirty().ok());
}

// Entries written after TakeDirty mark their file again, so the next checkpoint (which claims
// them) syncs it even though the earlier one synced the same file.
TEST_F(ConsumeQueueSyncTest, WritesAfterTakeDirtyAreTakenByTheNextCheckpoint) {
  auto cq = ConsumeQueue::Open(&fs_, dir_.Join("q"), 8);
  ASSERT_TRUE(cq.ok()) << cq.status();
  ASSERT_TRUE((*cq)->Append({PhysicalOffset(100), 100, 0}).ok());
  auto taken = (*cq)->TakeDirty();
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->files, std::vector<QueueOffset>{QueueOffset(0)});
  EXPECT_TRUE(taken->dir);
  EXPECT_TRUE(taken->parents);
  ASSERT_TRUE((*cq)->Append({PhysicalOffset(200), 100, 0}).ok());
  ASSERT_TRUE((*cq)->WriteBuffered().ok());
  ASSERT_TRUE((*cq)->SyncDirty(*taken, nullptr).ok());
  auto next = (*cq)->TakeDirty();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->files, std::vector<QueueOffset>{QueueOffset(0)});
  EXPECT_FALSE(next->dir);
  EXPECT_FALSE(next->parents);
  (*cq)->ReturnDirty(*next);  // as after a failed sync: the marks are back
  auto back = (*cq)->TakeDirty();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->files, std::vector<QueueOffset>{QueueOffset(0)});
}

}  // namespace
}  // namespace tokimq
