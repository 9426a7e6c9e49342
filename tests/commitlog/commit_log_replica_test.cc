// CommitLog::ReadChunk / AppendChunk and MessageStore::AppendReplicated: a follower's copy of a
// leader's log is byte for byte the same, resumes after a restart, and refuses bad chunks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "commitlog/commit_log.h"
#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "common/fault_injection_fs.h"
#include "test_util.h"

namespace tokimq {
namespace {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file of dir, name -> content.
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 20) out[name] = ReadWholeFile(e.path().string());
  }
  return out;
}

class CommitLogReplicaTest : public ::testing::Test {
 protected:
  CommitLogOptions Options(const std::string& name) {
    CommitLogOptions o;
    o.dir = dir_.Join(name);
    o.segment_size = 4096;
    o.max_message_size = 3000;
    o.async_flush_interval_ms = 0;
    return o;
  }
  std::unique_ptr<CommitLog> OpenLog(const std::string& name) {
    auto log = CommitLog::Open(&fs_, &clock_, Options(name));
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? std::move(*log) : nullptr;
  }
  // Bodies of varied sizes so records end at many positions, some a few bytes before a
  // segment end.
  void Fill(CommitLog* log, int n, int first = 0) {
    for (int i = first; i < first + n; ++i) {
      Message m;
      m.topic = "t";
      m.queue_id = i % 3;
      m.queue_offset = QueueOffset(i);
      m.body.assign(static_cast<size_t>(50 + (i * 37) % 400), static_cast<char>('a' + i % 26));
      ASSERT_TRUE(log->Append(&m).ok());
      clock_.AdvanceMs(1);
    }
  }
  // Pulls until the follower has everything; returns the number of chunks.
  int CopyAll(CommitLog* leader, CommitLog* follower, size_t max_bytes) {
    int chunks = 0;
    while (follower->MaxOffset().value() < leader->MaxOffset().value()) {
      auto chunk = leader->ReadChunk(follower->MaxOffset(), max_bytes);
      EXPECT_TRUE(chunk.ok()) << chunk.status();
      if (!chunk.ok()) return chunks;
      auto end = follower->AppendChunk(*chunk);
      EXPECT_TRUE(end.ok()) << end.status();
      if (!end.ok()) return chunks;
      ++chunks;
    }
    return chunks;
  }

  testing::TempDir dir_;
  ManualClock clock_;
  FaultInjectionFileSystem fs_;
};

TEST_F(CommitLogReplicaTest, FollowerCopyIsByteIdenticalAcrossSegments) {
  auto leader = OpenLog("leader");
  auto follower = OpenLog("follower");
  Fill(leader.get(), 120);
  ASSERT_GT(leader->MaxOffset().value(), 4 * 4096);  // several segments, several blank records
  EXPECT_GT(CopyAll(leader.get(), follower.get(), 1000), 10);
  EXPECT_EQ(follower->MaxOffset().value(), leader->MaxOffset().value());
  ASSERT_TRUE(leader->Close().ok());
  ASSERT_TRUE(follower->Close().ok());
  auto a = Files(dir_.Join("leader"));
  auto b = Files(dir_.Join("follower"));
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    // The last segment of the leader may be longer only by never-written (zero) space.
    EXPECT_EQ(bytes, b[name]) << name;
  }
}

TEST_F(CommitLogReplicaTest, FollowerResumesFromItsEndAfterRestart) {
  auto leader = OpenLog("leader");
  Fill(leader.get(), 40);
  {
    auto follower = OpenLog("follower");
    CopyAll(leader.get(), follower.get(), 700);
    // Crash without Close: the reopened log recovers by scanning.
  }
  Fill(leader.get(), 40, 40);
  auto follower = OpenLog("follower");
  const int64_t resumed_at = follower->MaxOffset().value();
  EXPECT_GT(resumed_at, 0);
  CopyAll(leader.get(), follower.get(), 700);
  for (int64_t off = 0; off < leader->MaxOffset().value();) {
    auto a = leader->ReadNext(PhysicalOffset(off));
    auto b = follower->ReadNext(PhysicalOffset(off));
    ASSERT_TRUE(a.ok() && b.ok()) << off;
    EXPECT_EQ(a->first.body, b->first.body);
    EXPECT_EQ(a->first.store_ms, b->first.store_ms);
    EXPECT_EQ(a->second, b->second);
    off = a->second.value();
  }
}

TEST_F(CommitLogReplicaTest, ChunkWithBadChecksumIsRefusedAndNothingWritten) {
  auto leader = OpenLog("leader");
  auto follower = OpenLog("follower");
  Fill(leader.get(), 5);
  auto chunk = leader->ReadChunk(PhysicalOffset(0), 100000);
  ASSERT_TRUE(chunk.ok());
  chunk->bytes[chunk->bytes.size() - 3] ^= 0x20;  // in the last record's body
  auto end = follower->AppendChunk(*chunk);
  EXPECT_EQ(end.status().code(), absl::StatusCode::kDataLoss) << end.status();
  EXPECT_EQ(follower->MaxOffset().value(), 0);
  chunk->bytes.resize(chunk->bytes.size() - 1);  // torn last record
  EXPECT_EQ(follower->AppendChunk(*chunk).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(follower->MaxOffset().value(), 0);
}

TEST_F(CommitLogReplicaTest, ChunkForAnotherOffsetIsRefused) {
  auto leader = OpenLog("leader");
  auto follower = OpenLog("follower");
  Fill(leader.get(), 5);
  auto first = leader->ReadChunk(PhysicalOffset(0), 1);  // exactly the first record
  ASSERT_TRUE(first.ok());
  auto second = leader->ReadChunk(PhysicalOffset(static_cast<int64_t>(first->bytes.size())), 1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(follower->AppendChunk(*second).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A record moved to another position fails its offset check even with a good CRC.
  ReplicaChunk moved{PhysicalOffset(0), second->bytes};
  EXPECT_EQ(follower->AppendChunk(moved).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(follower->MaxOffset().value(), 0);
}

TEST_F(CommitLogReplicaTest, ReadChunkSendsWholeRecordsAndRefusesOffsetsPastTheEnd) {
  auto leader = OpenLog("leader");
  Fill(leader.get(), 3);
  auto one = leader->ReadChunk(PhysicalOffset(0), 1);
  ASSERT_TRUE(one.ok());
  auto rec = leader->ReadNext(PhysicalOffset(0));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(static_cast<int64_t>(one->bytes.size()), rec->second.value());  // one whole record
  auto all = leader->ReadChunk(PhysicalOffset(0), 1 << 20);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(static_cast<int64_t>(all->bytes.size()), leader->MaxOffset().value());
  auto none = leader->ReadChunk(leader->MaxOffset(), 1 << 20);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->bytes.empty());
  EXPECT_EQ(leader->ReadChunk(leader->MaxOffset() + 1, 100).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(CommitLogReplicaTest, FollowerStoreRebuildsTheLeadersConsumeQueues) {
  auto open = [&](const std::string& name) {
    MessageStoreOptions o;
    o.dir = dir_.Join(name);
    o.commitlog.segment_size = 4096;
    o.commitlog.async_flush_interval_ms = 0;
    o.consume_queue_segment_entries = 16;
    o.checkpoint_interval_ms = 0;
    auto s = MessageStore::Open(&fs_, &clock_, std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  };
  auto leader = open("leader");
  auto follower = open("follower");
  int notified = 0;
  follower->SetDispatchListener([&](const std::string&, int32_t, QueueOffset) { ++notified; });
  for (int i = 0; i < 60; ++i) {
    Message m;
    m.topic = i % 2 ? "odd" : "even";
    m.queue_id = i % 3;
    m.body = "m" + std::to_string(i);
    ASSERT_TRUE(leader->Put(std::move(m)).ok());
  }
  while (follower->commit_log()->MaxOffset().value() < leader->commit_log()->MaxOffset().value()) {
    auto chunk = leader->commit_log()->ReadChunk(follower->commit_log()->MaxOffset(), 500);
    ASSERT_TRUE(chunk.ok());
    auto end = follower->AppendReplicated(*chunk);
    ASSERT_TRUE(end.ok()) << end.status();
  }
  EXPECT_GT(notified, 0);
  for (const char* topic : {"odd", "even"}) {
    for (int q = 0; q < 3; ++q) {
      EXPECT_EQ(follower->MaxQueueOffset(topic, q).value(), 10);
      auto a = leader->ReadQueue(topic, q, QueueOffset(0), 100);
      auto b = follower->ReadQueue(topic, q, QueueOffset(0), 100);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(a->size(), b->size());
      for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].body, (*b)[i].body);
    }
  }
}

TEST_F(CommitLogReplicaTest, FollowerStartedAtASegmentBaseKeepsTheLeadersQueueOffsets) {
  // docs/replication.md "A follower behind the leader's retention": the follower's CommitLog
  // starts empty at a segment base of the leader's (an empty segment file named by it, as
  // RejoinBeforeOpen makes it); its ConsumeQueues start at the queue offsets the copied
  // records carry, also after a reopen, and a put after them continues the leader's numbering.
  auto options = [&](const std::string& name) {
    MessageStoreOptions o;
    o.dir = dir_.Join(name);
    o.commitlog.segment_size = 4096;
    o.commitlog.async_flush_interval_ms = 0;
    o.consume_queue_segment_entries = 16;
    o.checkpoint_interval_ms = 0;
    return o;
  };
  auto leader = MessageStore::Open(&fs_, &clock_, options("leader"));
  ASSERT_TRUE(leader.ok()) << leader.status();
  for (int i = 0; i < 80; ++i) {
    Message m;
    m.topic = i % 4 == 0 ? "rare" : "t";
    m.body = "m" + std::to_string(i) + std::string(static_cast<size_t>(100 + i % 7 * 30), 'x');
    ASSERT_TRUE((*leader)->Put(std::move(m)).ok());
  }
  const PhysicalOffset base(2 * 4096);
  ASSERT_GT((*leader)->commit_log()->MaxOffset().value(), base.value() + 4096);
  ASSERT_TRUE(fs_.CreateDirs(dir_.Join("follower") + "/commitlog").ok());
  ASSERT_TRUE(fs_.Open(dir_.Join("follower") + "/commitlog/00000000000000008192",
                       OpenMode::kTruncate)
                  .ok());
  // The leader's first queue offsets at or past `base`.
  std::map<std::string, int64_t> first;
  for (const char* topic : {"t", "rare"}) {
    auto all = (*leader)->ReadQueue(topic, 0, QueueOffset(0), 1000);
    ASSERT_TRUE(all.ok());
    for (const Message& m : *all) {
      if (m.physical_offset >= base) {
        first[topic] = m.queue_offset.value();
        break;
      }
    }
    ASSERT_GT(first[topic], 0) << topic;
  }
  auto check = [&](MessageStore* follower) {
    for (const char* topic : {"t", "rare"}) {
      EXPECT_EQ(follower->MinQueueOffset(topic, 0).value(), first[topic]) << topic;
      EXPECT_EQ(follower->MaxQueueOffset(topic, 0), (*leader)->MaxQueueOffset(topic, 0));
      auto a = (*leader)->ReadQueue(topic, 0, QueueOffset(first[topic]), 1000);
      auto b = follower->ReadQueue(topic, 0, QueueOffset(0), 1000);  // clamped to the first
      ASSERT_TRUE(a.ok() && b.ok()) << b.status();
      ASSERT_EQ(a->size(), b->size()) << topic;
      for (size_t i = 0; i < a->size(); ++i) {
        EXPECT_EQ((*a)[i].body, (*b)[i].body);
        EXPECT_EQ((*a)[i].queue_offset, (*b)[i].queue_offset);
      }
    }
  };
  {
    auto follower = MessageStore::Open(&fs_, &clock_, options("follower"));
    ASSERT_TRUE(follower.ok()) << follower.status();
    EXPECT_EQ((*follower)->commit_log()->MinOffset(), base);
    EXPECT_EQ((*follower)->commit_log()->MaxOffset(), base);
    while ((*follower)->commit_log()->MaxOffset() < (*leader)->commit_log()->MaxOffset()) {
      auto chunk = (*leader)->commit_log()->ReadChunk((*follower)->commit_log()->MaxOffset(), 700);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      auto end = (*follower)->AppendReplicated(*chunk);
      ASSERT_TRUE(end.ok()) << end.status();
    }
    check(follower->get());
    ASSERT_TRUE((*follower)->Close().ok());
  }
  auto follower = MessageStore::Open(&fs_, &clock_, options("follower"));
  ASSERT_TRUE(follower.ok()) << follower.status();
  check(follower->get());
  Message m;
  m.topic = "t";
  m.body = "after promotion";
  auto put = (*follower)->Put(std::move(m));
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->queue_offset, (*leader)->MaxQueueOffset("t", 0));
}

TEST_F(CommitLogReplicaTest, TruncateFilesCutsTheLogAndItsQueuesAtARecordBoundary) {
  // A rejoining replica (docs/replication.md "Rejoin"): its store, cut offline at an offset of
  // the leader's log, reopens ending there, with no ConsumeQueue entry past it; later appends
  // continue from there.
  MessageStoreOptions o;
  o.dir = dir_.Join("store");
  o.commitlog.segment_size = 4096;
  o.commitlog.async_flush_interval_ms = 0;
  o.checkpoint_interval_ms = 0;
  PhysicalOffset cut;
  {
    auto store = MessageStore::Open(&fs_, &clock_, o);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 40; ++i) {
      Message m;
      m.topic = "t";
      m.body = std::string(static_cast<size_t>(100 + i * 7), 'x');
      auto put = (*store)->Put(std::move(m));
      ASSERT_TRUE(put.ok());
      if (i == 24) cut = put->physical_offset + put->size;  // keep 25 messages
    }
    ASSERT_GT((*store)->commit_log()->MaxOffset().value(), 2 * 4096);  // the cut removes a segment too
    ASSERT_TRUE((*store)->Close().ok());
  }
  auto removed = CommitLog::TruncateFiles(&fs_, o.dir + "/commitlog", 4096, cut);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_GT(*removed, 0);
  auto store = MessageStore::Open(&fs_, &clock_, o);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->commit_log()->MaxOffset(), cut);
  EXPECT_EQ((*store)->MaxQueueOffset("t", 0).value(), 25);
  Message m;
  m.topic = "t";
  m.body = "after the cut";
  auto put = (*store)->Put(std::move(m));
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->queue_offset.value(), 25);
  auto read = (*store)->ReadQueue("t", 0, QueueOffset(24), 10);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[1].body, "after the cut");
  // Cutting at or past the end removes nothing.
  ASSERT_TRUE((*store)->Close().ok());
  auto again = CommitLog::TruncateFiles(&fs_, o.dir + "/commitlog", 4096, PhysicalOffset(1 << 30));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
}

}  // namespace
}  // namespace tokimq
