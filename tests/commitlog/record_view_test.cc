// record::DecodeView (in-place decode, same checks as Decode) and MessageStore::VisitQueue
// (same records and errors as ReadQueue, no Message built).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "common/fault_injection_fs.h"
#include "test_util.h"

namespace tokimq {
namespace {

Message Sample() {
  Message m;
  m.topic = "orders";
  m.queue_id = 3;
  m.queue_offset = QueueOffset(17);
  m.physical_offset = PhysicalOffset(4096);
  m.born_ms = 111;
  m.store_ms = 222;
  m.flags = kFlagIndexed;
  m.properties[prop::kDeliverMs] = "1700000000123";
  m.properties[prop::kRealTopic] = "real";
  m.properties["EMPTY"] = "";
  m.body = "hello";
  return m;
}

TEST(RecordViewTest, DecodeViewSeesEveryFieldWithoutCopying) {
  std::string rec;
  record::Encode(Sample(), &rec);
  record::RecordView v;
  ASSERT_TRUE(record::DecodeView(rec, &v).ok());
  EXPECT_EQ(v.size, rec.size());
  EXPECT_EQ(v.flags, kFlagIndexed);
  EXPECT_EQ(v.queue_id, 3);
  EXPECT_EQ(v.queue_offset.value(), 17);
  EXPECT_EQ(v.physical_offset.value(), 4096);
  EXPECT_EQ(v.born_ms, 111);
  EXPECT_EQ(v.store_ms, 222);
  EXPECT_EQ(v.topic, "orders");
  EXPECT_EQ(v.body, "hello");
  EXPECT_GE(v.body.data(), rec.data());  // points into the record
  EXPECT_LT(v.body.data(), rec.data() + rec.size());
  std::string_view val;
  ASSERT_TRUE(v.FindProperty(prop::kDeliverMs, &val));
  EXPECT_EQ(val, "1700000000123");
  ASSERT_TRUE(v.FindProperty("EMPTY", &val));
  EXPECT_EQ(val, "");
  EXPECT_FALSE(v.FindProperty("REAL", &val));  // prefix of a key is not a key
  EXPECT_FALSE(v.FindProperty(prop::kTag, &val));
  Message back;
  record::MessageFromView(v, &back);
  std::string again;
  record::Encode(back, &again);
  EXPECT_EQ(again, rec);
}

TEST(RecordViewTest, DecodeViewRejectsWhatDecodeRejects) {
  std::string rec;
  record::Encode(Sample(), &rec);
  for (size_t i = 0; i < rec.size(); ++i) {  // any flipped byte: checksum or header error
    std::string bad = rec;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    record::RecordView v;
    Message m;
    absl::Status a = record::DecodeView(bad, &v), b = record::Decode(bad, &m);
    EXPECT_FALSE(a.ok()) << "byte " << i;
    EXPECT_EQ(a.code(), b.code()) << "byte " << i;
    EXPECT_EQ(a.message(), b.message()) << "byte " << i;
  }
  record::RecordView v;
  EXPECT_EQ(record::DecodeView(std::string_view(rec).substr(0, rec.size() - 1), &v).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(record::DecodeView("short", &v).code(), absl::StatusCode::kDataLoss);
}

TEST(RecordViewTest, DecodeCopiedViewSkipsOnlyTheChecksum) {
  std::string rec;
  record::Encode(Sample(), &rec);
  record::RecordView v;
  ASSERT_TRUE(record::DecodeCopiedView(rec, &v).ok());
  EXPECT_EQ(v.bytes, rec);
  EXPECT_EQ(v.body, "hello");
  // A changed body byte: the checksum catches it, the copied-record decode does not look.
  std::string changed = rec;
  changed[rec.size() - 1] = 'X';
  EXPECT_EQ(record::DecodeView(changed, &v).code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(record::DecodeCopiedView(changed, &v).ok());
  EXPECT_EQ(v.body, "hellX");
  // Lengths are still checked: a cut record or a wrong size field is refused.
  EXPECT_EQ(record::DecodeCopiedView(std::string_view(rec).substr(0, rec.size() - 1), &v).code(),
            absl::StatusCode::kDataLoss);
  std::string bad_size = rec;
  bad_size[4] = static_cast<char>(bad_size[4] + 1);  // total_size, after the 4-byte magic
  EXPECT_EQ(record::DecodeCopiedView(bad_size, &v).code(), absl::StatusCode::kDataLoss);
}

class VisitQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MessageStoreOptions o;
    o.dir = dir_.path();
    o.commitlog.segment_size = 4096;  // ~150 B records: several segments
    o.commitlog.async_flush_interval_ms = 0;
    o.checkpoint_interval_ms = 0;
    auto s = MessageStore::Open(&fs_, &clock_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    for (int i = 0; i < 80; ++i) {
      Message m;
      m.topic = i % 4 == 0 ? "other" : "q";
      m.body = "body-" + std::to_string(i) + std::string(static_cast<size_t>(i), 'x');
      m.properties[prop::kMessageId] = std::to_string(i);
      ASSERT_TRUE(store_->Put(std::move(m)).ok());
    }
  }

  testing::TempDir dir_;
  FaultInjectionFileSystem fs_;
  ManualClock clock_{1'000};
  std::unique_ptr<MessageStore> store_;
};

TEST_F(VisitQueueTest, VisitsTheRecordsReadQueueReturnsInOrder) {
  auto want = store_->ReadQueue("q", 0, QueueOffset(5), 40);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), 40u);
  std::vector<Message> got;
  auto n = store_->VisitQueue("q", 0, QueueOffset(5), 40, [&](const record::RecordView& v) {
    record::MessageFromView(v, &got.emplace_back());
    return absl::OkStatus();
  });
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 40u);
  ASSERT_EQ(got.size(), want->size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].queue_offset.value(), static_cast<int64_t>(5 + i));
    EXPECT_EQ(got[i].physical_offset.value(), (*want)[i].physical_offset.value());
    EXPECT_EQ(got[i].body, (*want)[i].body);
    EXPECT_EQ(got[i].properties, (*want)[i].properties);
  }
  // The default implementation (over ReadQueue) visits the same.
  size_t base_count = 0;
  auto b = store_->MessageStore::VisitQueue("q", 0, QueueOffset(5), 40, [&](const record::RecordView& v) {
    EXPECT_EQ(v.physical_offset.value(), (*want)[base_count].physical_offset.value());
    EXPECT_EQ(v.body, (*want)[base_count].body);
    ++base_count;
    return absl::OkStatus();
  });
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, 40u);
}

TEST_F(VisitQueueTest, VisitorErrorStopsTheWalkAndIsReturned) {
  int calls = 0;
  auto n = store_->VisitQueue("q", 0, QueueOffset(0), 60, [&](const record::RecordView&) {
    return ++calls == 3 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(n.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);
}

TEST_F(VisitQueueTest, UnknownQueueAndEndOfQueueVisitNothing) {
  auto visit = [](const record::RecordView&) { return absl::OkStatus(); };
  auto a = store_->VisitQueue("none", 0, QueueOffset(0), 10, visit);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 0u);
  auto b = store_->VisitQueue("q", 0, store_->MaxQueueOffset("q", 0), 10, visit);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 0u);
  auto c = store_->VisitQueue("q", 0, QueueOffset(0), 0, visit);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 0u);
}

}  // namespace
}  // namespace tokimq
