// Transactional messages against the real broker (docs/transactions.md): half invisibility,
// commit / rollback / idempotent end over the native API, check-back to the C++ Producer's
// checker on the manual clock, a pending half across kill -9, and the CLI.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "support/await.h"
#include "support/run_command.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::OutgoingMessage;
using client::Producer;
using client::ReceivedMessage;
using client::ReceiveOptions;
using client::SimpleConsumer;
using client::TransactionCheck;
using client::TransactionResolution;

class TransactionIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override { StartBroker(); }
  void StartBroker() {
    broker_ = std::make_unique<testing::BrokerProcess>(dir_.Join("data"));
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    admin_ = std::make_unique<client::AdminClient>(broker_->Options());
    producer_ = std::make_unique<Producer>(broker_->Options());
  }
  void CreateTopic(const std::string& name, proto::TopicType type) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(type);
    t.set_queues(2);
    auto created = admin_->CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
  }
  // Long-polls up to `total_ms` of real time for messages of `topic`.
  std::vector<ReceivedMessage> ReceiveWithin(SimpleConsumer& c, const std::string& topic,
                                             int64_t total_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(total_ms);
    ReceiveOptions o;
    o.long_poll_ms = std::min<int64_t>(total_ms, 1000);
    for (;;) {
      auto got = c.Receive(topic, o);
      EXPECT_TRUE(got.ok()) << got.status();
      if ((got.ok() && !got->empty()) || std::chrono::steady_clock::now() >= deadline) {
        return got.ok() ? *got : std::vector<ReceivedMessage>{};
      }
    }
  }
  proto::TransactionStats TxStats() {
    auto st = admin_->Stats();
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->transactions() : proto::TransactionStats{};
  }
  std::string RunCli(const std::string& args) {
    std::string cmd = std::string(TOKIMQ_CLI_BIN) + " --broker 127.0.0.1:" +
                      std::to_string(broker_->port()) + " " + args + " 2>&1";
    testing::CommandResult r = testing::RunShell(cmd);
    return r.exit_code == 0 ? r.out : "FAILED: " + r.out;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::BrokerProcess> broker_;
  std::unique_ptr<client::AdminClient> admin_;
  std::unique_ptr<Producer> producer_;
};

OutgoingMessage Msg(const std::string& topic, const std::string& body) {
  OutgoingMessage m;
  m.topic = topic;
  m.body = body;
  m.key = body;
  return m;
}

TEST_F(TransactionIntegrationTest, HalfIsInvisibleUntilCommitAndEndIsIdempotent) {
  CreateTopic("orders", proto::TRANSACTION);
  CreateTopic("plain", proto::NORMAL);
  auto plain = producer_->Send(Msg("orders", "x"));
  EXPECT_TRUE(absl::IsInvalidArgument(plain.status())) << plain.status();
  auto wrong = producer_->SendTransactional(Msg("plain", "x"));
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status())) << wrong.status();

  auto a = producer_->SendTransactional(Msg("orders", "order-a"));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = producer_->SendTransactional(Msg("orders", "order-b"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(a->transaction_id.empty());
  SimpleConsumer consumer(broker_->Options(), "g");
  EXPECT_TRUE(ReceiveWithin(consumer, "orders", 300).empty());
  EXPECT_EQ(TxStats().halves_pending(), 2);

  ASSERT_TRUE(producer_->EndTransaction("orders", a->receipt.message_id, a->transaction_id,
                                        TransactionResolution::kCommit).ok());
  ASSERT_TRUE(producer_->EndTransaction("orders", b->receipt.message_id, b->transaction_id,
                                        TransactionResolution::kRollback).ok());
  std::vector<ReceivedMessage> got = ReceiveWithin(consumer, "orders", 10'000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "order-a");
  EXPECT_EQ(got[0].message_id, a->receipt.message_id);
  ASSERT_TRUE(consumer.Ack(got[0].receipt_handle).ok());
  // A retried commit is OK and stores nothing more; the other resolution and unknown ids fail.
  EXPECT_TRUE(producer_->EndTransaction("orders", a->receipt.message_id, a->transaction_id,
                                        TransactionResolution::kCommit).ok());
  absl::Status other = producer_->EndTransaction("orders", a->receipt.message_id,
                                                 a->transaction_id,
                                                 TransactionResolution::kRollback);
  EXPECT_TRUE(absl::IsFailedPrecondition(other)) << other;
  EXPECT_TRUE(absl::IsNotFound(producer_->EndTransaction("orders", "nope", a->transaction_id,
                                                         TransactionResolution::kCommit)));
  EXPECT_TRUE(ReceiveWithin(consumer, "orders", 300).empty());
  proto::TransactionStats s = TxStats();
  EXPECT_EQ(s.halves_pending(), 0);
  EXPECT_EQ(s.commits(), 1);
  EXPECT_EQ(s.rollbacks(), 1);
}

TEST_F(TransactionIntegrationTest, CheckBackAfterImmunityIsAnsweredByTheProducersChecker) {
  CreateTopic("orders", proto::TRANSACTION);
  std::atomic<int> checks{0};
  Producer checker_producer(broker_->Options());
  checker_producer.SetTransactionChecker({"orders"}, [&](const TransactionCheck& c) {
    ++checks;
    return c.body == "commit-me" ? TransactionResolution::kCommit
                                 : TransactionResolution::kRollback;
  });
  auto keep = producer_->SendTransactional(Msg("orders", "commit-me"));
  ASSERT_TRUE(keep.ok()) << keep.status();
  auto drop = producer_->SendTransactional(Msg("orders", "drop-me"));
  ASSERT_TRUE(drop.ok()) << drop.status();
  // Let the checker's poll register the topic (it polls every second).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(admin_->AdvanceClock(5'000).ok());
  SimpleConsumer consumer(broker_->Options(), "g");
  EXPECT_TRUE(ReceiveWithin(consumer, "orders", 500).empty());  // immunity 6 s not over
  EXPECT_EQ(checks.load(), 0);
  ASSERT_TRUE(admin_->AdvanceClock(1'000).ok());
  std::vector<ReceivedMessage> got = ReceiveWithin(consumer, "orders", 15'000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "commit-me");
  EXPECT_TRUE(tokimq::testing::AwaitTrue([&] { return TxStats().halves_pending() == 0; },
                                         std::chrono::seconds(10), "no pending half",
                                         std::chrono::milliseconds(50)));
  proto::TransactionStats s = TxStats();
  EXPECT_EQ(s.halves_pending(), 0);
  EXPECT_EQ(s.commits(), 1);
  EXPECT_EQ(s.rollbacks(), 1);
  EXPECT_EQ(s.checks_sent(), 2);
  EXPECT_EQ(checks.load(), 2);
}

TEST_F(TransactionIntegrationTest, PendingHalfSurvivesKillAndCommittedOneIsNotDuplicated) {
  CreateTopic("orders", proto::TRANSACTION);
  auto pending = producer_->SendTransactional(Msg("orders", "pending"));
  ASSERT_TRUE(pending.ok());
  auto done = producer_->SendTransactional(Msg("orders", "done"));
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE(producer_->EndTransaction("orders", done->receipt.message_id, done->transaction_id,
                                        TransactionResolution::kCommit).ok());
  broker_->Kill();
  ASSERT_TRUE(broker_->Start());
  admin_ = std::make_unique<client::AdminClient>(broker_->Options());
  producer_ = std::make_unique<Producer>(broker_->Options());
  EXPECT_EQ(TxStats().halves_pending(), 1);
  EXPECT_TRUE(producer_->EndTransaction("orders", done->receipt.message_id, done->transaction_id,
                                        TransactionResolution::kCommit).ok());
  ASSERT_TRUE(producer_->EndTransaction("orders", pending->receipt.message_id,
                                        pending->transaction_id,
                                        TransactionResolution::kCommit).ok());
  SimpleConsumer consumer(broker_->Options(), "g");
  std::map<std::string, int> seen;
  for (int i = 0; i < 3; ++i) {
    for (const ReceivedMessage& m : ReceiveWithin(consumer, "orders", i == 0 ? 10'000 : 500)) {
      seen[m.body]++;
    }
  }
  EXPECT_EQ(seen["done"], 1);
  EXPECT_EQ(seen["pending"], 1);
  EXPECT_EQ(seen.size(), 2u);
}

TEST_F(TransactionIntegrationTest, CliSendsTransactionalAndCommits) {
  ASSERT_EQ(RunCli("topic create --name orders --type transaction").rfind("FAILED", 0),
            std::string::npos);
  std::string out = RunCli("send --topic orders --transactional --body via-cli");
  ASSERT_EQ(out.rfind("sent ", 0), 0u) << out;
  std::string id = out.substr(5, out.find(' ', 5) - 5);
  size_t tx_at = out.find("tx=");
  ASSERT_NE(tx_at, std::string::npos) << out;
  std::string tx = out.substr(tx_at + 3);
  while (!tx.empty() && (tx.back() == '\n' || tx.back() == ' ')) tx.pop_back();
  EXPECT_NE(RunCli("send --topic orders --body plain").find("TRANSACTION"), std::string::npos);
  EXPECT_NE(RunCli("stats").find("transactions: halves_pending=1"), std::string::npos);
  out = RunCli("tx commit --topic orders --id " + id + " --tx " + tx);
  EXPECT_EQ(out, "committed " + id + "\n");
  out = RunCli("tx rollback --topic orders --id " + id + " --tx " + tx);
  EXPECT_EQ(out.rfind("FAILED", 0), 0u) << out;
  out = RunCli("consume --group g --topic orders --wait 5s --count 1 --ack");
  EXPECT_NE(out.find("via-cli"), std::string::npos) << out;
  EXPECT_NE(RunCli("stats").find("commits=1 rollbacks=0"), std::string::npos);
}

}  // namespace
}  // namespace tokimq
