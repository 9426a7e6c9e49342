// Retry / DLQ copies that can never be stored: a lease of a group named before the
// name rule ends with its copy parked in tokimq_sys_poison instead of failing forever.
#include <gtest/gtest.h>

#include "common/names.h"
#include "consumer/consumer_env.h"
#include "consumer/group_state.h"
#include "rocksdb/write_batch.h"

namespace tokimq::testing {
namespace {

using consumer::BlockLease;
using consumer::LeaseRecord;
using consumer::QueueKey;

// A lease of `group` on t/0 offset 0 (delivery attempt `attempt`), as an older broker wrote it.
void WriteLegacyLease(rocksdb::DB* db, const std::string& group, int64_t until_ms,
                      uint32_t attempt) {
  const QueueKey k{group, "t", "t", 0};
  LeaseRecord lease;
  lease.epoch = 1;
  lease.attempt = attempt;
  lease.invisible_until_ms = until_ms;
  lease.received_ms = until_ms - 1000;
  rocksdb::WriteBatch batch;
  const std::string block = consumer::LeaseBlockKey(k, 0);
  batch.Put(block, consumer::EncodeLeaseBlockValue(block, {BlockLease{0, lease}}));
  const std::string progress = consumer::ProgressKey(k);
  batch.Put(progress, consumer::EncodeOffsetValue(progress, 1));
  ASSERT_TRUE(db->Write(rocksdb::WriteOptions(), &batch).ok());
}

std::string Prop(const Message& m, const char* key) {
  auto it = m.properties.find(key);
  return it == m.properties.end() ? "<absent>" : it->second;
}

TEST_P(ConsumerTest, ExpiredLeaseOfAGroupNamedBeforeTheRuleIsParkedNotRetriedForever) {
  Send("t", 0, "m0");
  WriteLegacyLease(db_.get(), "sp ace", clock_.NowMs() + 1000, 1);
  Restart();
  EXPECT_EQ(svc_->InFlight("sp ace"), 1);  // the old state loads
  ReceiveRequest req;
  req.group = "sp ace";
  req.topic = "t";
  auto refused = svc_->Receive(req);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);  // but is unusable

  Advance(2000);  // the lease expires: its retry copy would go to "%RETRY%sp ace"
  auto parked = store()->ReadQueue(kPoisonTopic, 0, QueueOffset(0), 10);
  ASSERT_TRUE(parked.ok()) << parked.status();
  ASSERT_EQ(parked->size(), 1u);
  const Message& m = (*parked)[0];
  EXPECT_EQ(m.body, "m0");
  EXPECT_EQ(Prop(m, kPoisonSource), "retry");
  EXPECT_EQ(Prop(m, kPoisonTopicProp), "%RETRY%sp ace");
  EXPECT_NE(Prop(m, kPoisonReason).find("invalid topic name '%RETRY%sp ace'"), std::string::npos)
      << Prop(m, kPoisonReason);
  EXPECT_EQ(Prop(m, prop::kOriginalTopic), "t");
  EXPECT_EQ(svc_->InFlight("sp ace"), 0);  // the lease ended
  Advance(60'000);
  EXPECT_EQ(store()->ReadQueue(kPoisonTopic, 0, QueueOffset(0), 10)->size(), 1u);  // once
  EXPECT_EQ(store()->MaxQueueOffset("%RETRY%sp ace", 0).value(), 0);
}

TEST_P(ConsumerTest, ExhaustedLeaseOfAGroupNamedBeforeTheRuleIsParkedInsteadOfItsDlq) {
  Send("t", 0, "m0");
  // Attempts exhausted (any policy allows fewer than 1000): the copy is for "%DLQ%a:b".
  WriteLegacyLease(db_.get(), "a:b", clock_.NowMs() + 1000, 1000);
  Restart();
  Advance(2000);
  auto parked = store()->ReadQueue(kPoisonTopic, 0, QueueOffset(0), 10);
  ASSERT_TRUE(parked.ok());
  ASSERT_EQ(parked->size(), 1u);
  EXPECT_EQ(Prop((*parked)[0], kPoisonTopicProp), "%DLQ%a:b");
  EXPECT_EQ(Prop((*parked)[0], kPoisonSource), "dlq");
  EXPECT_EQ(svc_->InFlight("a:b"), 0);
}

}  // namespace
}  // namespace tokimq::testing
