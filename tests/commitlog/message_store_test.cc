#include "commitlog/message_store.h"

#include <gtest/gtest.h>

#include <map>

#include "commitlog/consume_queue.h"
#include "common/coding.h"
#include "common/fault_injection_fs.h"
#include "test_util.h"

namespace tokimq {
namespace {

class MessageStoreTest : public ::testing::Test {
 protected:
  MessageStoreOptions Options() {
    MessageStoreOptions o;
    o.dir = dir_.path();
    o.commitlog.segment_size = 4096;
    o.commitlog.max_message_size = 1024;
    o.commitlog.async_flush_interval_ms = 0;
    o.consume_queue_segment_entries = 16;
    o.checkpoint_interval_ms = 0;
    return o;
  }
  std::unique_ptr<MessageStore> OpenStore(MessageStoreOptions o) {
    auto s = MessageStore::Open(&fs_, &clock_, std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  static Message Msg(const std::string& topic, int qid, int i, size_t body = 100) {
    Message m;
    m.topic = topic;
    m.queue_id = qid;
    m.born_ms = 5;
    m.properties[prop::kTag] = i % 2 ? "odd" : "even";
    m.body = "m" + std::to_string(i) + std::string(body, 'x');
    return m;
  }
  // Every entry of every queue, by (topic, queue).
  using Snapshot = std::map<std::pair<std::string, int>, std::vector<ConsumeQueueEntry>>;
  Snapshot Entries(MessageStore* s, const std::vector<std::pair<std::string, int>>& queues) {
    Snapshot snap;
    for (const auto& [t, q] : queues) {
      for (QueueOffset o = s->MinQueueOffset(t, q); o < s->MaxQueueOffset(t, q); ++o) {
        auto e = s->GetEntry(t, q, o);
        EXPECT_TRUE(e.ok() && e->has_value());
        if (e.ok() && e->has_value()) snap[{t, q}].push_back(**e);
      }
    }
    return snap;
  }

  testing::TempDir dir_;
  ManualClock clock_;
  FaultInjectionFileSystem fs_;
};

TEST(TagHashTest, IsStableAndZeroOnlyForNoTag) {
  EXPECT_EQ(TagHash(""), 0u);
  EXPECT_EQ(TagHash("a"), 0xaf63dc4c8601ec8cull);  // FNV-1a 64 of "a"
  EXPECT_NE(TagHash("TagA"), TagHash("TagB"));
}

TEST_F(MessageStoreTest, PutAssignsQueueOffsetsAndReadQueueReturnsThemInOrder) {
  auto store = OpenStore(Options());
  std::vector<std::pair<std::string, int>> dispatched;
  store->SetDispatchListener(
      [&](const std::string& t, int32_t q, QueueOffset o) { dispatched.emplace_back(t, int(o.value())); });
  for (int i = 0; i < 60; ++i) {
    auto r = store->Put(Msg("orders", i % 3, i));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->queue_offset.value(), i / 3);
  }
  EXPECT_EQ(dispatched.size(), 60u);
  EXPECT_EQ(store->MaxQueueOffset("orders", 1).value(), 20);
  EXPECT_EQ(store->MinQueueOffset("orders", 1).value(), 0);
  EXPECT_EQ(store->MaxQueueOffset("nope", 0).value(), 0);
  auto msgs = store->ReadQueue("orders", 1, QueueOffset(5), 100);
  ASSERT_TRUE(msgs.ok()) << msgs.status();
  ASSERT_EQ(msgs->size(), 15u);
  for (size_t k = 0; k < msgs->size(); ++k) {
    const Message& m = (*msgs)[k];
    EXPECT_EQ(m.queue_offset.value(), 5 + static_cast<int64_t>(k));
    EXPECT_EQ(m.body, Msg("orders", 1, 1 + 3 * (5 + static_cast<int>(k))).body);
  }
  auto e = store->GetEntry("orders", 2, QueueOffset(4));
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->tag_hash, TagHash("even"));  // message 14
  auto read = store->Read((*e)->physical_offset);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->queue_offset.value(), 4);
  EXPECT_EQ((*e)->size, read->EncodedSize());
  auto past = store->GetEntry("orders", 2, QueueOffset(20));
  ASSERT_TRUE(past.ok());
  EXPECT_FALSE(past->has_value());
}

TEST_F(MessageStoreTest, InvalidTopicAndOversizeBodyAreRefused) {
  auto store = OpenStore(Options());
  EXPECT_TRUE(absl::IsInvalidArgument(store->Put(Msg("../x", 0, 0)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->Put(Msg("", 0, 0)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->Put(Msg("t", -1, 0)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->Put(Msg("t", 0, 0, 2000)).status()));
  EXPECT_EQ(store->MaxQueueOffset("t", 0).value(), 0);
  EXPECT_TRUE(store->Put(Msg("%DLQ%group-1", 0, 0)).ok());
}

// Properties section bytes of `props` (what Message::encoded_properties holds).
std::string Section(const std::map<std::string, std::string>& props) {
  std::string out;
  for (const auto& [k, v] : props) {
    PutLengthPrefixed(&out, k);
    PutLengthPrefixed(&out, v);
  }
  return out;
}

TEST_F(MessageStoreTest, EncodedPropertiesAreIndexedByTagAndReadBackAsTheMap) {
  auto store = OpenStore(Options());
  Message tagged = Msg("t", 0, 0);  // TAGS "even", in the map
  Message tagged_bytes = tagged;
  tagged_bytes.encoded_properties = Section(tagged_bytes.properties);
  tagged_bytes.properties.clear();
  Message untagged_bytes = Msg("t", 0, 1);
  untagged_bytes.properties.clear();
  untagged_bytes.encoded_properties = Section({{"KEYS", "k"}, {"TAGSX", "not the tag"}});
  std::vector<Message> batch = {tagged, tagged_bytes, untagged_bytes};
  auto r = store->PutBatch(std::move(batch));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].size, (*r)[1].size);
  auto snap = Entries(store.get(), {{"t", 0}});
  const std::vector<ConsumeQueueEntry>& entries = snap[std::make_pair(std::string("t"), 0)];
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].tag_hash, TagHash("even"));
  EXPECT_EQ(entries[1].tag_hash, TagHash("even"));
  EXPECT_EQ(entries[2].tag_hash, 0u);
  auto msgs = store->ReadQueue("t", 0, QueueOffset(0), 10);
  ASSERT_TRUE(msgs.ok()) << msgs.status();
  ASSERT_EQ(msgs->size(), 3u);
  EXPECT_EQ((*msgs)[1].properties, tagged.properties);
  EXPECT_TRUE((*msgs)[1].encoded_properties.empty());
  EXPECT_EQ((*msgs)[2].properties,
            (std::map<std::string, std::string>{{"KEYS", "k"}, {"TAGSX", "not the tag"}}));
}

TEST_F(MessageStoreTest, MessageWithBothPropertyFormsIsRefused) {
  auto store = OpenStore(Options());
  Message both = Msg("t", 0, 0);
  both.encoded_properties = Section({{"KEYS", "k"}});
  EXPECT_TRUE(absl::IsInvalidArgument(store->Put(both).status()));
  std::vector<Message> batch = {Msg("t", 0, 1), both};
  EXPECT_TRUE(absl::IsInvalidArgument(store->PutBatch(std::move(batch)).status()));
  EXPECT_EQ(store->MaxQueueOffset("t", 0).value(), 0);
}

TEST_F(MessageStoreTest, PutBatchAssignsConsecutiveOffsetsPerQueue) {
  auto store = OpenStore(Options());
  std::map<std::pair<std::string, int>, std::vector<int64_t>> dispatched;
  store->SetDispatchListener([&](const std::string& t, int32_t q, QueueOffset o) {
    dispatched[{t, q}].push_back(o.value());
  });
  std::vector<Message> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(Msg("b", i % 2, i));
  batch.push_back(Msg("c", 0, 10));
  auto r = store->PutBatch(std::move(batch));
  ASSERT_TRUE(r.ok()) << r.status();
  // The listener hears once per destination queue, with the last offset put there.
  using Calls = std::map<std::pair<std::string, int>, std::vector<int64_t>>;
  EXPECT_EQ(dispatched, (Calls{{{"b", 0}, {4}}, {{"b", 1}, {4}}, {{"c", 0}, {0}}}));
  for (int i = 0; i < 10; ++i) EXPECT_EQ((*r)[i].queue_offset.value(), i / 2);
  EXPECT_EQ(store->MaxQueueOffset("b", 0).value(), 5);
  auto msgs = store->ReadQueue("b", 1, QueueOffset(0), 10);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs->size(), 5u);
  EXPECT_EQ((*msgs)[4].body, Msg("b", 1, 9).body);
}

TEST_F(MessageStoreTest, CleanReopenKeepsQueuesAndContinuesOffsets) {
  auto store = OpenStore(Options());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(store->Put(Msg("t", i % 2, i)).ok());
  ASSERT_TRUE(store->Close().ok());
  store.reset();
  store = OpenStore(Options());
  EXPECT_EQ(store->MaxQueueOffset("t", 0).value(), 50);
  EXPECT_EQ(store->MaxQueueOffset("t", 1).value(), 50);
  auto r = store->Put(Msg("t", 1, 100));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->queue_offset.value(), 50);
  auto msgs = store->ReadQueue("t", 1, QueueOffset(48), 10);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs->size(), 3u);
  EXPECT_EQ((*msgs)[2].body, Msg("t", 1, 100).body);
}

TEST_F(MessageStoreTest, ConsumeQueueAfterCrashEqualsTheOneBeforeForDurableRecords) {
  const std::vector<std::pair<std::string, int>> queues = {{"a", 0}, {"a", 1}, {"b", 0}};
  auto store = OpenStore(Options());
  int i = 0;
  for (; i < 90; ++i)
    ASSERT_TRUE(store->Put(Msg(queues[i % 3].first, queues[i % 3].second, i)).ok());
  ASSERT_TRUE(store->Flush().ok());  // CommitLog + queues + checkpoint durable
  for (; i < 150; ++i)
    ASSERT_TRUE(store->Put(Msg(queues[i % 3].first, queues[i % 3].second, i)).ok());
  ASSERT_TRUE(store->commit_log()->Flush().ok());  // records durable, queues not checkpointed
  const int64_t durable = store->commit_log()->FlushedOffset().value();
  for (; i < 200; ++i)
    ASSERT_TRUE(store->Put(Msg(queues[i % 3].first, queues[i % 3].second, i)).ok());
  Snapshot before = Entries(store.get(), queues);
  store.reset();  // crash
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());

  store = OpenStore(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->commit_log()->MaxOffset().value(), durable);
  Snapshot after = Entries(store.get(), queues);
  for (const auto& q : queues) {
    std::vector<ConsumeQueueEntry> want;
    for (const auto& e : before[q]) {
      if (e.physical_offset.value() + e.size <= durable) want.push_back(e);
    }
    ASSERT_EQ(after[q].size(), want.size()) << q.first << "/" << q.second;
    EXPECT_EQ(after[q].size(), 50u);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(after[q][k].physical_offset.value(), want[k].physical_offset.value());
      EXPECT_EQ(after[q][k].size, want[k].size);
      EXPECT_EQ(after[q][k].tag_hash, want[k].tag_hash);
    }
  }
  // New puts continue right after the recovered entries.
  auto r = store->Put(Msg("a", 0, 999));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->queue_offset.value(), 50);
}

TEST_F(MessageStoreTest, QueuesAreRebuiltWhenTheirFilesAndCheckpointAreLost) {
  auto store = OpenStore(Options());
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(store->Put(Msg("t", i % 4, i)).ok());
  ASSERT_TRUE(store->Close().ok());
  store.reset();
  std::filesystem::remove_all(dir_.Join("consumequeue"));
  std::filesystem::remove(dir_.Join("checkpoint"));
  store = OpenStore(Options());
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(store->MaxQueueOffset("t", q).value(), 10);
    auto msgs = store->ReadQueue("t", q, QueueOffset(0), 100);
    ASSERT_TRUE(msgs.ok()) << msgs.status();
    ASSERT_EQ(msgs->size(), 10u);
    EXPECT_EQ((*msgs)[9].body, Msg("t", q, 36 + q).body);
  }
}

TEST_F(MessageStoreTest, RecordsAppendedDirectlyToTheCommitLogAreNotIndexed) {
  auto store = OpenStore(Options());
  ASSERT_TRUE(store->Put(Msg("t", 0, 0)).ok());
  Message raw = Msg("t", 0, 1);
  raw.queue_offset = QueueOffset(7);
  raw.flags = kFlagIndexed;
  ASSERT_TRUE(store->commit_log()->Append(&raw).ok());
  EXPECT_EQ(raw.flags & kFlagIndexed, 0u);
  ASSERT_TRUE(store->Put(Msg("t", 0, 2)).ok());
  store.reset();  // crash: the rescan must skip the direct record
  std::filesystem::remove(dir_.Join("checkpoint"));
  store = OpenStore(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->MaxQueueOffset("t", 0).value(), 2);
}

TEST_F(MessageStoreTest, SyncPutIsDurableWhenItReturns) {
  auto o = Options();
  o.commitlog.flush_mode = FlushMode::kSync;
  auto store = OpenStore(o);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(store->Put(Msg("s", 0, i)).ok());
  store.reset();
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  store = OpenStore(o);
  EXPECT_EQ(store->MaxQueueOffset("s", 0).value(), 20);
}

TEST_F(MessageStoreTest, FailedFsyncFailsSyncPutAndLaterPuts) {
  auto o = Options();
  o.commitlog.flush_mode = FlushMode::kSync;
  auto store = OpenStore(o);
  ASSERT_TRUE(store->Put(Msg("s", 0, 0)).ok());
  fs_.SetFailSync(true);
  EXPECT_FALSE(store->Put(Msg("s", 0, 1)).ok());
  fs_.SetFailSync(false);
  EXPECT_FALSE(store->Put(Msg("s", 0, 2)).ok());
  store.reset();
  ASSERT_TRUE(fs_.DropUnsyncedData().ok());
  store = OpenStore(o);
  EXPECT_EQ(store->MaxQueueOffset("s", 0).value(), 1);
}

TEST_F(MessageStoreTest, RetentionSkipsDeletedEntriesAndHonoursPins) {
  auto store = OpenStore(Options());
  int64_t pin = INT64_MAX;
  store->AddPinProvider([&] { return PhysicalOffset(pin); });
  std::vector<int64_t> phys;
  for (int i = 0; i < 100; ++i) {  // ~2.6 KiB per 12 records: about 4 segments
    auto r = store->Put(Msg("r", 0, i));
    ASSERT_TRUE(r.ok());
    phys.push_back(r->physical_offset.value());
  }
  clock_.AdvanceMs(60'000);
  for (int i = 100; i < 110; ++i) ASSERT_TRUE(store->Put(Msg("r", 0, i)).ok());
  pin = 4096;  // segment 0 may go, nothing after it
  auto n = store->DeleteExpired(30'000);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  const int64_t first_kept = std::lower_bound(phys.begin(), phys.end(), 4096) - phys.begin();
  EXPECT_EQ(store->MinQueueOffset("r", 0).value(), first_kept);
  EXPECT_TRUE(absl::IsNotFound(store->GetEntry("r", 0, QueueOffset(0)).status()));
  auto msgs = store->ReadQueue("r", 0, QueueOffset(0), 5);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs->size(), 5u);
  EXPECT_EQ((*msgs)[0].queue_offset.value(), first_kept);

  pin = INT64_MAX;
  n = store->DeleteExpired(30'000);
  ASSERT_TRUE(n.ok());
  EXPECT_GE(*n, 1);
  const int64_t min_phys = store->commit_log()->MinOffset().value();
  const int64_t expect_min = std::lower_bound(phys.begin(), phys.end(), min_phys) - phys.begin();
  EXPECT_EQ(store->MinQueueOffset("r", 0).value(), expect_min);
  EXPECT_EQ(store->MaxQueueOffset("r", 0).value(), 110);
  ASSERT_TRUE(store->Close().ok());
  store = OpenStore(Options());
  EXPECT_EQ(store->MinQueueOffset("r", 0).value(), expect_min);
  EXPECT_EQ(store->MaxQueueOffset("r", 0).value(), 110);
}

class ConsumeQueueTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(ConsumeQueueTest, EntriesSurviveReopenAcrossFiles) {
  {
    auto cq = ConsumeQueue::Open(FileSystem::Default(), dir_.Join("q"), 8);
    ASSERT_TRUE(cq.ok());
    for (int i = 0; i < 300; ++i) ASSERT_TRUE((*cq)->Append({PhysicalOffset(i * 100), 100, uint64_t(i)}).ok());
    ASSERT_TRUE((*cq)->Sync().ok());
  }
  auto cq = ConsumeQueue::Open(FileSystem::Default(), dir_.Join("q"), 8);
  ASSERT_TRUE(cq.ok());
  EXPECT_EQ((*cq)->MaxOffset(), QueueOffset(300));
  auto all = (*cq)->Entries(QueueOffset(0), 1000);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 300u);
  for (int i = 0; i < 300; ++i) EXPECT_EQ((*all)[i].physical_offset.value(), i * 100);
  ASSERT_TRUE((*cq)->TruncateTo(QueueOffset(17)).ok());
  EXPECT_EQ((*cq)->MaxOffset(), QueueOffset(17));
  ASSERT_TRUE((*cq)->Append({PhysicalOffset(1), 2, 3}).ok());
  auto e = (*cq)->Get(QueueOffset(17));
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->physical_offset.value(), 1);
}

TEST_F(ConsumeQueueTest, PartialTrailingEntryIsDropped) {
  {
    auto cq = ConsumeQueue::Open(FileSystem::Default(), dir_.Join("q"), 8);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*cq)->Append({PhysicalOffset(i), 1, 0}).ok());
    ASSERT_TRUE((*cq)->Sync().ok());
  }
  auto f = FileSystem::Default()->Open(dir_.Join("q/00000000000000000000"), OpenMode::kReadWrite);
  ASSERT_TRUE((*f)->Truncate(4 * 20 + 7).ok());
  auto cq = ConsumeQueue::Open(FileSystem::Default(), dir_.Join("q"), 8);
  ASSERT_TRUE(cq.ok());
  EXPECT_EQ((*cq)->MaxOffset(), QueueOffset(4));
}

// Retention advances the valid minimum while every entry is still buffered (no file yet); the
// first file write must not reset it to the file's first offset.
TEST_F(ConsumeQueueTest, ValidMinimumSurvivesTheFirstFileWrite) {
  auto cq = ConsumeQueue::Open(FileSystem::Default(), dir_.Join("q"), 8);
  ASSERT_TRUE(cq.ok()) << cq.status();
  for (int i = 0; i < 12; ++i) ASSERT_TRUE((*cq)->Append({PhysicalOffset(i * 100), 100, 0}).ok());
  ASSERT_TRUE((*cq)->AdvanceMinValid(PhysicalOffset(1000)).ok());  // records of offsets 0..9 are gone
  EXPECT_EQ((*cq)->MinValidOffset(), QueueOffset(10));
  ASSERT_TRUE((*cq)->WriteBuffered().ok());  // creates files 0 and 8
  EXPECT_EQ((*cq)->MinValidOffset(), QueueOffset(10));
  EXPECT_EQ((*cq)->MinOffset(), QueueOffset(0));
  EXPECT_EQ((*cq)->MaxOffset(), QueueOffset(12));
  auto e = (*cq)->Get(QueueOffset(10));
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->physical_offset.value(), 1000);
  // A later pass still moves it forward, and whole files below it go.
  ASSERT_TRUE((*cq)->AdvanceMinValid(PhysicalOffset(1100)).ok());
  EXPECT_EQ((*cq)->MinValidOffset(), QueueOffset(11));
  EXPECT_EQ((*cq)->MinOffset(), QueueOffset(8));
}

// Without retention the first file write still sets both minimums to the file's first offset.
TEST_F(ConsumeQueueTest, FirstFileWriteSetsMinimumsWithoutRetention) {
  auto cq = ConsumeQueue::Open(FileSystem::Default(), dir_.Join("q"), 8);
  ASSERT_TRUE(cq.ok()) << cq.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*cq)->Append({PhysicalOffset(i * 100), 100, 0}).ok());
  ASSERT_TRUE((*cq)->WriteBuffered().ok());
  EXPECT_EQ((*cq)->MinValidOffset(), QueueOffset(0));
  EXPECT_EQ((*cq)->MinOffset(), QueueOffset(0));
}

}  // namespace
}  // namespace tokimq
