// TransactionService on a ManualClock, a real MessageStore + TimerStore over a fault-injecting
// file system: half invisibility, commit / rollback, idempotent end, check schedule, max checks,
// recovery after a crash at every byte of a commit, retention pin.
#include "transaction/transaction_service.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "commitlog/message_store.h"
#include "commitlog/record.h"
#include "timerstore/timer_env.h"
#include "timerstore/timer_store.h"
#include "transaction/transaction_op.h"

namespace tokimq::broker {
namespace {

using testing::kStartMs;
using testing::TimerEnv;

class TransactionServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { tx_.reset(); }

  void Open() {
    tx_.reset();
    env_.Open();
    auto tx = TransactionService::Open(&env_.clock(), &env_.ms(), &env_.ts(), options_);
    ASSERT_TRUE(tx.ok()) << tx.status();
    tx_ = std::move(*tx);
    tx_->SetCheckSink([this](const HalfCheck& c) {
      checks_.push_back(c);
      return producer_live_;
    });
  }
  // kill -9: no flush, no checkpoint (written bytes stay), faults cleared, reopened.
  void Kill() {
    tx_.reset();
    env_.CloseForCrash();
    env_.fs().ClearFaults();
    Open();
  }

  HalfPutResult PutHalf(const std::string& id, int64_t deliver_ms = 0, int64_t immunity_ms = 6000,
                        const std::string& topic = "t") {
    Message m;
    m.topic = topic;
    m.queue_id = 0;
    m.body = "body-" + id;
    m.properties[prop::kMessageId] = id;
    m.properties["order"] = id;
    auto r = tx_->Put({{std::move(m), deliver_ms, immunity_ms}});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->front() : HalfPutResult{};
  }
  std::vector<Message> Topic(const std::string& topic) { return env_.Delivered(topic); }

  TimerEnv env_{100};
  TransactionOptions options_;
  std::unique_ptr<TransactionService> tx_;
  std::vector<HalfCheck> checks_;
  bool producer_live_ = true;
};

TEST_F(TransactionServiceTest, HalfIsInvisibleUntilCommitted) {
  HalfPutResult h = PutHalf("m1");
  EXPECT_FALSE(h.transaction_id.empty());
  EXPECT_TRUE(Topic("t").empty());
  EXPECT_EQ(tx_->Stats().pending, 1);
  ASSERT_TRUE(tx_->End("t", "m1", h.transaction_id, TxOutcome::kCommit, false).ok());
  std::vector<Message> t = Topic("t");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].body, "body-m1");
  EXPECT_EQ(t[0].properties.at(prop::kMessageId), "m1");
  EXPECT_EQ(t[0].properties.at("order"), "m1");
  EXPECT_EQ(t[0].properties.at(prop::kTxHalfOffset), std::to_string(h.put.physical_offset.value()));
  EXPECT_EQ(t[0].properties.count(prop::kRealTopic), 0u);
  TransactionStats s = tx_->Stats();
  EXPECT_EQ(s.pending, 0);
  EXPECT_EQ(s.commits, 1);
  // The op record.
  std::vector<Message> ops = Topic(kOpTopic);
  ASSERT_EQ(ops.size(), 1u);
  std::optional<OpRecord> op = ParseOpRecord(ops[0]);
  ASSERT_TRUE(op.has_value());
  EXPECT_EQ(op->half_phys, h.put.physical_offset.value());
  EXPECT_EQ(op->outcome, TxOutcome::kCommit);
}

TEST_F(TransactionServiceTest, RollbackDiscardsTheHalf) {
  HalfPutResult h = PutHalf("m1");
  ASSERT_TRUE(tx_->End("t", "m1", h.transaction_id, TxOutcome::kRollback, false).ok());
  EXPECT_TRUE(Topic("t").empty());
  EXPECT_EQ(tx_->Stats().rollbacks, 1);
  EXPECT_EQ(tx_->Stats().pending, 0);
}

TEST_F(TransactionServiceTest, EndIsIdempotentAndRefusesTheOtherOutcome) {
  HalfPutResult h = PutHalf("m1");
  ASSERT_TRUE(tx_->End("t", "m1", h.transaction_id, TxOutcome::kCommit, false).ok());
  EXPECT_TRUE(tx_->End("t", "m1", h.transaction_id, TxOutcome::kCommit, false).ok());
  EXPECT_EQ(Topic("t").size(), 1u);
  absl::Status other = tx_->End("t", "m1", h.transaction_id, TxOutcome::kRollback, false);
  EXPECT_TRUE(absl::IsFailedPrecondition(other)) << other;
  EXPECT_TRUE(absl::IsNotFound(tx_->End("t", "nope", h.transaction_id, TxOutcome::kCommit, false)));
  EXPECT_TRUE(absl::IsNotFound(tx_->End("t", "m1", "wrong-tx", TxOutcome::kCommit, false)));
  EXPECT_TRUE(absl::IsNotFound(tx_->End("u", "m1", h.transaction_id, TxOutcome::kCommit, false)));
  EXPECT_EQ(Topic("t").size(), 1u);
  EXPECT_EQ(Topic(kOpTopic).size(), 1u);
}

TEST_F(TransactionServiceTest, FirstCheckAfterImmunityThenEveryInterval) {
  PutHalf("m1");
  env_.clock().SetMs(kStartMs + 5'999);
  ASSERT_TRUE(tx_->RunChecks().ok());
  EXPECT_TRUE(checks_.empty());
  env_.clock().SetMs(kStartMs + 6'000);
  ASSERT_TRUE(tx_->RunChecks().ok());
  ASSERT_EQ(checks_.size(), 1u);
  EXPECT_EQ(checks_[0].check_count, 1);
  EXPECT_EQ(checks_[0].msg.topic, "t");
  EXPECT_EQ(checks_[0].msg.body, "body-m1");
  EXPECT_EQ(checks_[0].msg.properties.at("order"), "m1");
  env_.clock().SetMs(kStartMs + 6'000 + 29'999);
  ASSERT_TRUE(tx_->RunChecks().ok());
  EXPECT_EQ(checks_.size(), 1u);
  env_.clock().SetMs(kStartMs + 6'000 + 30'000);
  ASSERT_TRUE(tx_->RunChecks().ok());
  ASSERT_EQ(checks_.size(), 2u);
  EXPECT_EQ(checks_[1].check_count, 2);
  EXPECT_EQ(tx_->Stats().checks_sent, 2);
}

TEST_F(TransactionServiceTest, PerMessageImmunityOverridesTheDefault) {
  PutHalf("fast", 0, 1'000);
  PutHalf("slow", 0, 6'000);
  env_.clock().SetMs(kStartMs + 1'000);
  ASSERT_TRUE(tx_->RunChecks().ok());
  ASSERT_EQ(checks_.size(), 1u);
  EXPECT_EQ(checks_[0].msg.properties.at(prop::kMessageId), "fast");
}

TEST_F(TransactionServiceTest, CheckAnswerEndsTheHalf) {
  HalfPutResult h = PutHalf("m1");
  env_.clock().SetMs(kStartMs + 6'000);
  ASSERT_TRUE(tx_->RunChecks().ok());
  ASSERT_EQ(checks_.size(), 1u);
  EXPECT_EQ(checks_[0].transaction_id, h.transaction_id);
  ASSERT_TRUE(tx_->End("t", "m1", checks_[0].transaction_id, TxOutcome::kCommit, true).ok());
  env_.clock().SetMs(kStartMs + 36'000);
  ASSERT_TRUE(tx_->RunChecks().ok());
  EXPECT_EQ(checks_.size(), 1u);
  EXPECT_EQ(Topic("t").size(), 1u);
  EXPECT_EQ(Topic(kOpTopic)[0].properties.at(prop::kTxSource), "check");
}

TEST_F(TransactionServiceTest, AfterMaxChecksTheHalfMovesToTheUnresolvedTopic) {
  producer_live_ = false;  // checks count even with no live producer (RocketMQ)
  HalfPutResult h = PutHalf("m1");
  int64_t t = kStartMs + 6'000;
  for (int i = 0; i < 15; ++i, t += 30'000) {
    env_.clock().SetMs(t);
    ASSERT_TRUE(tx_->RunChecks().ok());
  }
  EXPECT_EQ(checks_.size(), 15u);
  EXPECT_TRUE(Topic(kUnresolvedTopic).empty());
  env_.clock().SetMs(t);
  ASSERT_TRUE(tx_->RunChecks().ok());
  EXPECT_EQ(checks_.size(), 15u);
  std::vector<Message> un = Topic(kUnresolvedTopic);
  ASSERT_EQ(un.size(), 1u);
  EXPECT_EQ(un[0].body, "body-m1");
  EXPECT_EQ(un[0].properties.at(prop::kRealTopic), "t");
  TransactionStats s = tx_->Stats();
  EXPECT_EQ(s.pending, 0);
  EXPECT_EQ(s.moved_unresolved, 1);
  EXPECT_EQ(s.checks_without_producer, 15);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      tx_->End("t", "m1", h.transaction_id, TxOutcome::kCommit, false)));
  EXPECT_TRUE(Topic("t").empty());
}

TEST_F(TransactionServiceTest, CommitWithDeliverTimeEntersTheTimerStore) {
  HalfPutResult h = PutHalf("m1", kStartMs + 10'000);
  ASSERT_TRUE(tx_->End("t", "m1", h.transaction_id, TxOutcome::kCommit, false).ok());
  env_.Run();
  EXPECT_TRUE(Topic("t").empty());
  env_.AdvanceTo(kStartMs + 10'000);
  std::vector<Message> t = Topic("t");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_GE(t[0].store_ms, kStartMs + 10'000);
}

TEST_F(TransactionServiceTest, RecoveryRebuildsPendingHalvesAndEndedOnes) {
  HalfPutResult a = PutHalf("a");
  HalfPutResult b = PutHalf("b");
  ASSERT_TRUE(tx_->End("t", "b", b.transaction_id, TxOutcome::kCommit, false).ok());
  Kill();
  EXPECT_EQ(tx_->Stats().pending, 1);
  EXPECT_TRUE(tx_->End("t", "b", b.transaction_id, TxOutcome::kCommit, false).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(
      tx_->End("t", "b", b.transaction_id, TxOutcome::kRollback, false)));
  // The unresolved half is checked after the restart.
  env_.clock().SetMs(kStartMs + 6'000);
  ASSERT_TRUE(tx_->RunChecks().ok());
  ASSERT_EQ(checks_.size(), 1u);
  EXPECT_EQ(checks_[0].msg.properties.at(prop::kMessageId), "a");
  ASSERT_TRUE(tx_->End("t", "a", a.transaction_id, TxOutcome::kCommit, true).ok());
  EXPECT_EQ(Topic("t").size(), 2u);
}

// kill -9 after the write that crosses every 4th byte of a commit (copy, its ConsumeQueue entry, op
// record, ...): after the restart and a retried commit the message is in its topic exactly
// once, and a half whose commit copy survived without its op record is not pending.
TEST_F(TransactionServiceTest, CommitTornAtEveryByteAppearsExactlyOnce) {
  HalfPutResult first = PutHalf("probe");
  uint64_t before = env_.fs().bytes_written();
  ASSERT_TRUE(tx_->End("t", "probe", first.transaction_id, TxOutcome::kCommit, false).ok());
  const uint64_t commit_bytes = env_.fs().bytes_written() - before;
  ASSERT_GT(commit_bytes, 100u);
  for (uint64_t n = 0; n <= commit_bytes; n += 4) {  // every 4th byte: ~30 s under ASan
    std::string id = "m" + std::to_string(n);
    HalfPutResult h = PutHalf(id);
    ASSERT_TRUE(env_.ms().Flush().ok());
    env_.fs().TearAfterBytes(n);
    (void)tx_->End("t", id, h.transaction_id, TxOutcome::kCommit, false);
    Kill();
    int copies = 0;
    for (const Message& m : Topic("t")) copies += m.properties.at(prop::kMessageId) == id;
    ASSERT_LE(copies, 1) << "torn after " << n << " bytes";
    absl::Status again = tx_->End("t", id, h.transaction_id, TxOutcome::kCommit, false);
    ASSERT_TRUE(again.ok()) << "torn after " << n << " bytes: " << again;
    copies = 0;
    for (const Message& m : Topic("t")) copies += m.properties.at(prop::kMessageId) == id;
    ASSERT_EQ(copies, 1) << "torn after " << n << " bytes";
    ASSERT_EQ(tx_->Stats().pending, 0);
  }
}

TEST_F(TransactionServiceTest, RolledBackHalfNeverAppearsAfterACrash) {
  HalfPutResult h = PutHalf("m1");
  ASSERT_TRUE(tx_->End("t", "m1", h.transaction_id, TxOutcome::kRollback, false).ok());
  Kill();
  EXPECT_TRUE(Topic("t").empty());
  EXPECT_EQ(tx_->Stats().pending, 0);
  env_.clock().SetMs(kStartMs + 600'000);
  ASSERT_TRUE(tx_->RunChecks().ok());
  EXPECT_TRUE(checks_.empty());
}

TEST_F(TransactionServiceTest, PendingHalfPinsItsSegmentAgainstRetention) {
  HalfPutResult h = PutHalf("m1");
  // Fill a few segments (1 MiB each) after the half, so its segment is not the last one.
  std::string body(200'000, 'x');
  for (int i = 0; i < 12; ++i) {
    Message m;
    m.topic = "filler";
    m.body = body;
    ASSERT_TRUE(env_.ms().Put(std::move(m)).ok());
  }
  env_.clock().SetMs(kStartMs + 3'600'000);
  ASSERT_TRUE(env_.ms().DeleteExpired(1'000).ok());
  EXPECT_TRUE(env_.ms().Read(h.put.physical_offset).ok());
  ASSERT_TRUE(tx_->End("t", "m1", h.transaction_id, TxOutcome::kRollback, false).ok());
  ASSERT_TRUE(env_.ms().DeleteExpired(1'000).ok());
  EXPECT_FALSE(env_.ms().Read(h.put.physical_offset).ok());
}

// docs/formats/transaction-op.md, worked example.
TEST(TransactionOpTest, OpRecordExampleOfTheFormatDoc) {
  Message op = MakeOpRecord(4096, "0190A3E2B5C0AABBCCDD00000001", "orders",
                            "1234567890ABCDEF00000001", TxOutcome::kCommit, "client");
  EXPECT_EQ(op.topic, "tokimq_sys_trans_op");
  EXPECT_TRUE(op.body.empty());
  op.physical_offset = PhysicalOffset(0);
  std::string rec;
  record::Encode(op, &rec);
  record::RecordView view;
  ASSERT_TRUE(record::DecodeView(rec, &view).ok());
  EXPECT_EQ(view.properties.size(), 173u);
  const std::string head("\x0a\0\0\0REAL_TOPIC\x06\0\0\0orders", 24);
  EXPECT_EQ(view.properties.substr(0, head.size()), head);
  std::optional<OpRecord> parsed = ParseOpRecord(op);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->half_phys, 4096);
  EXPECT_EQ(parsed->outcome, TxOutcome::kCommit);
  EXPECT_EQ(parsed->topic, "orders");
}

TEST(TransactionOpTest, UnknownOrIncompleteOpIsNotParsed) {
  Message op = MakeOpRecord(4096, "id", "orders", "tx", TxOutcome::kRollback, "client");
  Message unknown = op;
  unknown.properties[prop::kTxOp] = "MAYBE";
  EXPECT_FALSE(ParseOpRecord(unknown).has_value());
  Message negative = op;
  negative.properties[prop::kTxHalfOffset] = "-1";
  EXPECT_FALSE(ParseOpRecord(negative).has_value());
  Message missing = op;
  missing.properties.erase(prop::kTransactionId);
  EXPECT_FALSE(ParseOpRecord(missing).has_value());
  EXPECT_EQ(ParseOpRecord(op)->outcome, TxOutcome::kRollback);
}

}  // namespace
}  // namespace tokimq::broker
