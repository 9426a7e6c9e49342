// MessageStore::ReadMany / VisitMany (batched reads answer exactly as Read) and
// RemovePinProvider.
#include <gtest/gtest.h>

#include <vector>

#include "commitlog/message_store.h"
#include "common/fault_injection_fs.h"
#include "test_util.h"

namespace tokimq {
namespace {

class ReadManyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MessageStoreOptions o;
    o.dir = dir_.path();
    o.commitlog.segment_size = 4096;
    o.commitlog.async_flush_interval_ms = 0;
    o.checkpoint_interval_ms = 0;
    auto s = MessageStore::Open(&fs_, &clock_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    for (int i = 0; i < 60; ++i) {  // ~190 B records: several 4 KiB segments
      Message m;
      m.topic = i % 3 == 0 ? "a" : "b";
      m.body = "body-" + std::to_string(i) + std::string(static_cast<size_t>(i * 2), 'x');
      m.properties[prop::kMessageId] = std::to_string(i);
      auto r = store_->Put(std::move(m));
      ASSERT_TRUE(r.ok()) << r.status();
      puts_.push_back(*r);
    }
  }

  // Flips a body byte of record i (the i-th Put) in its segment file.
  void CorruptRecord(int i) {
    const int64_t off = puts_[i].physical_offset.value();
    const std::string seg = dir_.path() + "/commitlog/" +
                            std::string(20 - std::to_string(off / 4096 * 4096).size(), '0') +
                            std::to_string(off / 4096 * 4096);
    auto f = fs_.Open(seg, OpenMode::kReadWrite);
    ASSERT_TRUE(f.ok()) << f.status();
    const uint64_t at = static_cast<uint64_t>(off % 4096) + puts_[i].size - 2;
    ASSERT_TRUE((*f)->PWrite(at, "?").ok());
  }

  testing::TempDir dir_;
  FaultInjectionFileSystem fs_;
  ManualClock clock_{1'000};
  std::unique_ptr<MessageStore> store_;
  std::vector<PutResult> puts_;
};

TEST_F(ReadManyTest, MatchesReadForEveryRecordInAnyOrder) {
  std::vector<ReadRequest> reqs;
  for (int i = 59; i >= 0; i -= 2) reqs.push_back({puts_[i].physical_offset, puts_[i].size});
  for (int i = 0; i < 60; i += 2) reqs.push_back({puts_[i].physical_offset, puts_[i].size});
  reqs.push_back(reqs.front());  // the same record twice
  auto got = store_->ReadMany(reqs);
  ASSERT_EQ(got.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status();
    auto one = store_->Read(reqs[i].physical_offset);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(got[i]->physical_offset.value(), reqs[i].physical_offset.value());
    EXPECT_EQ(got[i]->body, one->body);
    EXPECT_EQ(got[i]->topic, one->topic);
    EXPECT_EQ(got[i]->queue_offset.value(), one->queue_offset.value());
    EXPECT_EQ(got[i]->properties, one->properties);
  }
}

TEST_F(ReadManyTest, VisitManyVisitsEachRequestOnceWithReadsRecordOrError) {
  std::vector<ReadRequest> reqs;
  for (int i = 59; i >= 0; i -= 3) reqs.push_back({puts_[i].physical_offset, puts_[i].size});
  reqs.push_back({puts_[4].physical_offset + 1, puts_[4].size});  // not a record start
  reqs.push_back({puts_[4].physical_offset, 3});                  // absurd size: still the record
  std::vector<int> visits(reqs.size(), 0);
  store_->VisitMany(reqs, [&](size_t i, const absl::StatusOr<record::RecordView>& v) {
    ASSERT_LT(i, reqs.size());
    ++visits[i];
    auto one = store_->Read(reqs[i].physical_offset);
    ASSERT_EQ(v.ok(), one.ok()) << v.status();
    if (!v.ok()) {
      EXPECT_EQ(v.status().code(), one.status().code());
      return;
    }
    Message m;
    record::MessageFromView(*v, &m);
    EXPECT_EQ(m.physical_offset.value(), reqs[i].physical_offset.value());
    EXPECT_EQ(m.topic, one->topic);
    EXPECT_EQ(m.body, one->body);
    EXPECT_EQ(m.queue_offset.value(), one->queue_offset.value());
    EXPECT_EQ(m.properties, one->properties);
  });
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(visits[i], 1) << "request " << i;
}

TEST_F(ReadManyTest, WrongSizesAndBadOffsetsGiveReadsAnswer) {
  const int64_t max = store_->commit_log()->MaxOffset().value();
  std::vector<ReadRequest> reqs = {
      {puts_[5].physical_offset, puts_[5].size + 7},  // wrong size: still the record
      {puts_[6].physical_offset, 3},                  // absurd size: still the record
      {puts_[7].physical_offset + 1, puts_[7].size},  // not a record start
      {PhysicalOffset(max), 100},                     // past the end
      {PhysicalOffset(-5), 100},                      // negative
      {puts_[8].physical_offset, puts_[8].size},
  };
  auto got = store_->ReadMany(reqs);
  ASSERT_EQ(got.size(), reqs.size());
  ASSERT_TRUE(got[0].ok()) << got[0].status();
  EXPECT_EQ(got[0]->body, store_->Read(puts_[5].physical_offset)->body);
  ASSERT_TRUE(got[1].ok()) << got[1].status();
  EXPECT_EQ(got[1]->body, store_->Read(puts_[6].physical_offset)->body);
  EXPECT_EQ(got[2].status().code(), store_->Read(reqs[2].physical_offset).status().code());
  EXPECT_FALSE(got[2].ok());
  EXPECT_TRUE(absl::IsNotFound(got[3].status())) << got[3].status();
  EXPECT_TRUE(absl::IsNotFound(got[4].status())) << got[4].status();
  ASSERT_TRUE(got[5].ok());
  EXPECT_EQ(got[5]->physical_offset.value(), puts_[8].physical_offset.value());
}

TEST_F(ReadManyTest, CorruptRecordIsDataLossOthersStillRead) {
  // Flip a body byte of record 10 on disk (its segment file): ReadMany reports kDataLoss for
  // it, as Read does, and still returns its neighbours.
  const int64_t off = puts_[10].physical_offset.value();
  CorruptRecord(10);
  std::vector<ReadRequest> reqs = {{puts_[9].physical_offset, puts_[9].size},
                                   {PhysicalOffset(off), puts_[10].size},
                                   {puts_[11].physical_offset, puts_[11].size}};
  auto got = store_->ReadMany(reqs);
  EXPECT_TRUE(got[0].ok());
  EXPECT_TRUE(absl::IsDataLoss(got[1].status())) << got[1].status();
  EXPECT_TRUE(absl::IsDataLoss(store_->Read(PhysicalOffset(off)).status()));
  EXPECT_TRUE(got[2].ok());
}

// Topics "a" and "b" interleave in the CommitLog (a, b, b, a, ...): a queue's records are
// separated by other records and by segment ends, which ReadQueue reads across in one pread.
TEST_F(ReadManyTest, ReadQueueAcrossInterleavedRecordsAndSegmentsMatchesRead) {
  for (const std::string topic : {"a", "b"}) {
    for (int64_t from : {0, 1, 7}) {
      auto got = store_->ReadQueue(topic, 0, QueueOffset(from), 64);
      ASSERT_TRUE(got.ok()) << got.status();
      int64_t expect = from;
      for (const Message& m : *got) {
        EXPECT_EQ(m.topic, topic);
        EXPECT_EQ(m.queue_offset.value(), expect++);
        auto one = store_->Read(m.physical_offset);
        ASSERT_TRUE(one.ok());
        EXPECT_EQ(m.body, one->body);
        EXPECT_EQ(m.properties, one->properties);
      }
      EXPECT_EQ(expect, store_->MaxQueueOffset(topic, 0).value()) << topic << " from " << from;
    }
  }
  // A corrupt record of "b" between two records of "a" does not disturb reading "a".
  CorruptRecord(1);
  EXPECT_TRUE(absl::IsDataLoss(store_->ReadQueue("b", 0, QueueOffset(0), 64).status()));
  auto a = store_->ReadQueue("a", 0, QueueOffset(0), 64);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->size(), 20u);
}

TEST_F(ReadManyTest, RemovedPinProviderIsNeverCalledAgain) {
  int calls_a = 0, calls_b = 0;
  auto a = store_->AddRemovablePinProvider([&] {
    ++calls_a;
    return PhysicalOffset(0);  // pins everything
  });
  auto b = store_->AddRemovablePinProvider([&] {
    ++calls_b;
    return PhysicalOffset(INT64_MAX);
  });
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  clock_.AdvanceMs(3'600'000);
  auto n = store_->DeleteExpired(1);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);  // pinned
  EXPECT_EQ(calls_a, 1);
  store_->RemovePinProvider(a);
  n = store_->DeleteExpired(1);
  ASSERT_TRUE(n.ok());
  EXPECT_GT(*n, 0);  // no pin left below the active segment
  EXPECT_EQ(calls_a, 1);
  EXPECT_EQ(calls_b, 2);
  store_->RemovePinProvider(b);
  store_->RemovePinProvider(12345);  // unknown id: no effect
}

}  // namespace
}  // namespace tokimq
