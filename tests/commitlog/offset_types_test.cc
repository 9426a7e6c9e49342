// The storage's public headers hand positions around in their own types (common/offsets.h,
// issue 15 item 4): a CommitLog byte offset is a PhysicalOffset, a ConsumeQueue entry index a
// QueueOffset, and neither is accepted where the other (or a bare integer) is meant. The
// static_asserts fail to compile against headers that take or return plain int64_t.
#include <gtest/gtest.h>

#include <type_traits>
#include <utility>

#include "commitlog/commit_log.h"
#include "commitlog/consume_queue.h"
#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "common/clock.h"
#include "common/offsets.h"
#include "test_util.h"

namespace tokimq {
namespace {

// Fields.
static_assert(std::is_same_v<decltype(Message::physical_offset), PhysicalOffset>);
static_assert(std::is_same_v<decltype(Message::queue_offset), QueueOffset>);
static_assert(std::is_same_v<decltype(record::RecordView::physical_offset), PhysicalOffset>);
static_assert(std::is_same_v<decltype(record::RecordView::queue_offset), QueueOffset>);
static_assert(std::is_same_v<decltype(PutResult::physical_offset), PhysicalOffset>);
static_assert(std::is_same_v<decltype(PutResult::queue_offset), QueueOffset>);
static_assert(std::is_same_v<decltype(ConsumeQueueEntry::physical_offset), PhysicalOffset>);
static_assert(std::is_same_v<decltype(ReadRequest::physical_offset), PhysicalOffset>);

// Results.
static_assert(std::is_same_v<decltype(std::declval<CommitLog&>().MaxOffset()), PhysicalOffset>);
static_assert(std::is_same_v<decltype(std::declval<CommitLog&>().MinOffset()), PhysicalOffset>);
static_assert(
    std::is_same_v<decltype(std::declval<CommitLog&>().FlushedOffset()), PhysicalOffset>);
static_assert(std::is_same_v<decltype(std::declval<CommitLog&>().Append(nullptr)),
                             absl::StatusOr<PhysicalOffset>>);
static_assert(std::is_same_v<decltype(std::declval<MessageStore&>().MaxQueueOffset("t", 0)),
                             QueueOffset>);
static_assert(std::is_same_v<decltype(std::declval<MessageStore&>().MinQueueOffset("t", 0)),
                             QueueOffset>);
static_assert(std::is_same_v<decltype(std::declval<ConsumeQueue&>().MaxOffset()), QueueOffset>);
static_assert(std::is_same_v<decltype(DurableEnd({})), PhysicalOffset>);

// Arguments: the right position type only.
template <typename T>
concept LogReadsAt = requires(const CommitLog& log, T at) { log.Read(at); };
template <typename T>
concept LogWaitsFor = requires(CommitLog& log, T end) { log.WaitDurable(end); };
template <typename T>
concept StoreReadsAt = requires(const MessageStore& s, T at) { s.Read(at); };
template <typename T>
concept StoreReadsQueueFrom = requires(const MessageStore& s, T from) {
  s.ReadQueue("t", 0, from, 1);
};
template <typename T>
concept QueueGets = requires(const ConsumeQueue& q, T at) { q.Get(at); };
template <typename T>
concept QueueAdvancesTo = requires(ConsumeQueue& q, T min) { q.AdvanceMinValid(min); };

static_assert(LogReadsAt<PhysicalOffset> && !LogReadsAt<QueueOffset> && !LogReadsAt<int64_t>);
static_assert(LogWaitsFor<PhysicalOffset> && !LogWaitsFor<QueueOffset> && !LogWaitsFor<int64_t>);
static_assert(StoreReadsAt<PhysicalOffset> && !StoreReadsAt<QueueOffset> &&
              !StoreReadsAt<int64_t>);
static_assert(StoreReadsQueueFrom<QueueOffset> && !StoreReadsQueueFrom<PhysicalOffset> &&
              !StoreReadsQueueFrom<int64_t>);
static_assert(QueueGets<QueueOffset> && !QueueGets<PhysicalOffset> && !QueueGets<int64_t>);
static_assert(QueueAdvancesTo<PhysicalOffset> && !QueueAdvancesTo<QueueOffset> &&
              !QueueAdvancesTo<int64_t>);

// The offsets a put returns are the ones the reads take back, with the units of each: bytes
// for the physical offset, entries for the queue offset.
TEST(OffsetTypes, PutResultOffsetsReadBackTheirRecordAndEntry) {
  testing::TempDir dir;
  ManualClock clock;
  MessageStoreOptions o;
  o.dir = dir.path();
  o.checkpoint_interval_ms = 0;
  o.commitlog.async_flush_interval_ms = 0;
  auto store = MessageStore::Open(FileSystem::Default(), &clock, o);
  ASSERT_TRUE(store.ok()) << store.status();
  PutResult puts[3];
  for (int i = 0; i < 3; ++i) {
    Message m;
    m.topic = "t";
    m.body = "body " + std::to_string(i);
    auto r = (*store)->Put(std::move(m));
    ASSERT_TRUE(r.ok()) << r.status();
    puts[i] = *r;
  }
  EXPECT_EQ(puts[0].physical_offset, PhysicalOffset(0));
  EXPECT_EQ(puts[1].physical_offset, puts[0].physical_offset + puts[0].size);
  EXPECT_EQ(puts[2].physical_offset - puts[1].physical_offset, int64_t{puts[1].size});
  EXPECT_EQ(puts[2].queue_offset, QueueOffset(2));
  EXPECT_EQ((*store)->MaxQueueOffset("t", 0), QueueOffset(3));
  EXPECT_EQ((*store)->commit_log()->MaxOffset(), DurableEnd(puts));

  auto entry = (*store)->GetEntry("t", 0, puts[1].queue_offset);
  ASSERT_TRUE(entry.ok() && entry->has_value());
  EXPECT_EQ((*entry)->physical_offset, puts[1].physical_offset);
  auto read = (*store)->Read((*entry)->physical_offset);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->body, "body 1");
  EXPECT_EQ(read->queue_offset, QueueOffset(1));
  auto queue = (*store)->ReadQueue("t", 0, QueueOffset(2), 10);
  ASSERT_TRUE(queue.ok());
  ASSERT_EQ(queue->size(), 1u);
  EXPECT_EQ((*queue)[0].physical_offset, puts[2].physical_offset);
  EXPECT_TRUE((*store)->Close().ok());
}

}  // namespace
}  // namespace tokimq
