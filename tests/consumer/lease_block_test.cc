// ConsumerService storage of leases: one lease block per queue per Receive, partial acks
// rewriting a block, expiry without any timer message, and data written by a version-1 broker
// (one key per lease) still honoured.
#include <gmock/gmock.h>

#include "consumer/consumer_env.h"
#include "consumer/consumer_service_impl.h"
#include "consumer/group_state.h"
#include "rocksdb/iterator.h"

namespace tokimq::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// Keys under `prefix` in the metadata DB.
std::vector<std::string> KeysWithPrefix(rocksdb::DB* db, const std::string& prefix) {
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    keys.push_back(it->key().ToString());
  }
  return keys;
}

TEST_P(ConsumerTest, OneReceiveAcrossQueuesWritesOneBlockPerQueueAndNoTimerMessage) {
  for (int i = 0; i < 4; ++i) Send("orders", i, "o" + std::to_string(i));
  auto got = Recv("g", "orders", 16, 30'000);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(KeysWithPrefix(db_.get(), "group/g/b/").size(), 4u);
  EXPECT_TRUE(KeysWithPrefix(db_.get(), "group/g/l/").empty());
  Advance(29'999);
  EXPECT_EQ(svc_->InFlight("g"), 4);  // not a millisecond early
  Advance(1);
  EXPECT_EQ(svc_->InFlight("g"), 0);
  // Lease expiry is the service's own in-memory index: no marker went through the timer store.
  EXPECT_EQ(store()->MaxQueueOffset(kLeaseTopic, 0).value(), 0);
  EXPECT_TRUE(KeysWithPrefix(db_.get(), "group/g/b/").empty());
  Advance(10'000);
  auto again = Recv("g", "orders", 16);
  std::vector<std::string> bodies;
  for (const auto& m : again) {
    bodies.push_back(m.message.body);
    EXPECT_EQ(m.delivery_attempt, 2);
  }
  EXPECT_THAT(bodies, UnorderedElementsAre("o0", "o1", "o2", "o3"));
}

TEST_P(ConsumerTest, PartialAckRewritesTheBlockAndRestartKeepsTheRest) {
  for (int i = 0; i < 3; ++i) Send("t", 0, "m" + std::to_string(i));
  auto got = Recv("g", "t", 3, 30'000);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(svc_->Ack("g", got[1].receipt_handle).ok());
  EXPECT_EQ(KeysWithPrefix(db_.get(), "group/g/b/").size(), 1u);
  Restart();
  EXPECT_EQ(svc_->InFlight("g"), 2);
  EXPECT_EQ(svc_->Ack("g", got[1].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(svc_->Ack("g", got[0].receipt_handle).ok());
  Restart();
  EXPECT_EQ(svc_->InFlight("g"), 1);
  Advance(30'000);  // the lease ends
  Advance(10'000);  // the first backoff step
  auto again = Recv("g", "t");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].message.body, "m2");
  EXPECT_EQ(again[0].delivery_attempt, 2);
  ASSERT_TRUE(svc_->Ack("g", again[0].receipt_handle).ok());
  // The block is gone once its last lease ended.
  EXPECT_TRUE(KeysWithPrefix(db_.get(), "group/g/b/").empty());
}

TEST_P(ConsumerTest, RenewRewritesOnlyItsLeaseInTheBlock) {
  for (int i = 0; i < 2; ++i) Send("t", 0, "m" + std::to_string(i));
  auto got = Recv("g", "t", 2, 30'000);
  ASSERT_EQ(got.size(), 2u);
  auto renewed = svc_->ChangeInvisibleDuration("g", got[1].receipt_handle, 120'000);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  Restart();
  Advance(30'000);  // m0's lease ends; m1's renewed one does not
  Advance(10'000);  // m0's first backoff step
  EXPECT_THAT(Bodies(Recv("g", "t")), ElementsAre("m0"));
  EXPECT_TRUE(svc_->Ack("g", *renewed).ok());
}

TEST_P(ConsumerTest, ExpiryIndexStaysBoundedUnderRenewalsAndTheLeaseStillExpires) {
  Send("t", 0, "m0");
  auto got = Recv("g", "t", 1, 12LL * 3600 * 1000);
  ASSERT_EQ(got.size(), 1u);
  std::string handle = got[0].receipt_handle;
  for (int i = 0; i < 6000; ++i) {  // each renewal leaves its old deadline in the index
    auto r = svc_->ChangeInvisibleDuration("g", handle, 12LL * 3600 * 1000 - i);
    ASSERT_TRUE(r.ok()) << r.status();
    handle = *r;
  }
  EXPECT_GT(svc_->ExpiryIndexEntries(), 6000);
  ASSERT_TRUE(svc_->RunUntilIdle().ok());  // compacts: one live lease, one entry
  EXPECT_EQ(svc_->ExpiryIndexEntries(), 1);
  // The last renewal (12 h - 5999 ms) still ends the lease, not a millisecond early.
  Advance(12LL * 3600 * 1000 - 6000);
  EXPECT_EQ(svc_->InFlight("g"), 1);
  Advance(1);
  EXPECT_EQ(svc_->InFlight("g"), 0);
}

TEST_P(ConsumerTest, LeaseKeyOfAVersionOneBrokerStillExpires) {
  Send("t", 0, "m0");
  CloseAll();
  {
    // What a version-1 broker left: progress past offset 0, a per-lease key, no block.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.Join("meta"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    const consumer::QueueKey k{"g", "t", "t", 0};
    const std::string pkey = consumer::ProgressKey(k);
    const std::string lkey = consumer::LeaseKey(k, 0);
    consumer::LeaseRecord lease{1, 1, clock_.NowMs() + 30'000, clock_.NowMs()};
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), pkey, consumer::EncodeOffsetValue(pkey, 1)).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), lkey, consumer::EncodeLeaseValue(lkey, lease)).ok());
  }
  OpenAll();
  EXPECT_EQ(svc_->InFlight("g"), 1);
  EXPECT_TRUE(Recv("g", "t").empty());
  // Open indexed its expiry (the broker that wrote it had its marker in the timer store, which
  // is no longer read).
  Advance(30'000);
  EXPECT_EQ(svc_->InFlight("g"), 0);
  EXPECT_TRUE(KeysWithPrefix(db_.get(), "group/g/l/").empty());
  Advance(10'000);
  auto again = Recv("g", "t");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].message.body, "m0");
  EXPECT_EQ(again[0].delivery_attempt, 2);
}

}  // namespace
}  // namespace tokimq::testing
