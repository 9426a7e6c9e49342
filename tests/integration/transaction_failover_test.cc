// Transactional messages across a failover (issue 20 item 1: "transaction state when it
// exists"; docs/transactions.md, docs/replication.md): half messages and op records are
// CommitLog records, so a follower holds them byte for byte and its transaction service
// recovers them at promotion. Real brokers on loopback in sync mode, real time; the leader is
// killed (-9), one follower promoted with the admin replication_role request (no etcd) and the
// other told to follow it (a sync leader answers receives only once a follower holds them).
// Asserted on the new leader: a half committed on the old leader is delivered once and never
// checked; a pending half is committed by EndTransaction with its original transaction id; the
// check-back of the pending halves reaches the producer's checker and its answers are applied
// (commit delivered once, rollback never delivered); nothing pending is left.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "replication_support.h"
#include "support/await.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::OutgoingMessage;
using client::Producer;
using client::SimpleConsumer;
using client::TransactionCheck;
using client::TransactionResolution;
using testing::BrokerProcess;

void CreateTransactionTopic(const BrokerProcess& b) {
  client::AdminClient admin(b.Options());
  proto::TopicConfig t;
  t.set_name("orders");
  t.set_type(proto::TRANSACTION);
  t.set_queues(1);
  auto created = admin.CreateTopic(t);
  ASSERT_TRUE(created.ok()) << created.status();
}

// A half of "orders" whose check-back comes `immunity_s` seconds after it is stored.
OutgoingMessage Half(const std::string& body, int immunity_s) {
  OutgoingMessage m;
  m.topic = "orders";
  m.body = body;
  m.key = body;
  m.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] = std::to_string(immunity_s);
  return m;
}

class TransactionFailoverTest : public testing::ReplicaGroupTest {
 protected:
  std::unique_ptr<BrokerProcess> StartBroker(const std::string& name, int id,
                                             const std::string& leader) {
    return StartReplica(name, id, leader, {"--replication", "sync"});
  }
};

TEST_F(TransactionFailoverTest, PromotedFollowerResolvesTheOldLeadersHalvesOnce) {
  auto leader = StartBroker("a", 0, "");
  auto follower = StartBroker("b", 1, Address(*leader));
  auto other = StartBroker("c", 2, Address(*leader));
  // Topic metadata is not replicated (docs/replication.md): created on every replica.
  for (const auto* b : {leader.get(), follower.get(), other.get()}) CreateTransactionTopic(*b);

  Producer producer(leader->Options());
  // Committed on the old leader: its commit (the real message and the op record) is replicated.
  auto committed = producer.SendTransactional(Half("committed-before", 3600));
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_TRUE(producer
                  .EndTransaction("orders", committed->receipt.message_id,
                                  committed->transaction_id, TransactionResolution::kCommit)
                  .ok());
  // Pending at the kill: two resolved by check-back, one by an EndTransaction sent to the new
  // leader (its immunity is an hour: no check-back may come for it in this test).
  auto check_commit = producer.SendTransactional(Half("check-commit", 2));
  ASSERT_TRUE(check_commit.ok()) << check_commit.status();
  auto check_rollback = producer.SendTransactional(Half("check-rollback", 2));
  ASSERT_TRUE(check_rollback.ok()) << check_rollback.status();
  auto end_on_new = producer.SendTransactional(Half("end-on-new", 3600));
  ASSERT_TRUE(end_on_new.ok()) << end_on_new.status();

  // Sync mode: every answer above came after the follower held its records; the CommitLog
  // ends are equal once the follower's last pull is in.
  auto leader_end = testing::ReplicationRole(*leader);
  ASSERT_TRUE(leader_end.ok()) << leader_end.status();
  ASSERT_TRUE(testing::AwaitCopiedTo(*follower, leader_end->max_offset()));
  leader->Kill();

  auto promoted = testing::PromoteTo(*follower, 2);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  ASSERT_EQ(promoted->role(), "leader");
  auto following = testing::FollowIn(*other, 2, *follower);
  ASSERT_TRUE(following.ok()) << following.status();
  ASSERT_EQ(following->role(), "follower");

  client::AdminClient admin(follower->Options());
  auto stats = admin.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->transactions().halves_pending(), 3);

  Producer on_new(follower->Options());
  ASSERT_TRUE(on_new
                  .EndTransaction("orders", end_on_new->receipt.message_id,
                                  end_on_new->transaction_id, TransactionResolution::kCommit)
                  .ok());
  std::mutex mu;
  std::map<std::string, int> checks;  // body -> check-backs answered
  on_new.SetTransactionChecker({"orders"}, [&](const TransactionCheck& c) {
    std::lock_guard<std::mutex> l(mu);
    ++checks[c.body];
    return c.body == "check-commit" ? TransactionResolution::kCommit
                                    : TransactionResolution::kRollback;
  });
  ASSERT_TRUE(testing::AwaitTrue(
      [&] {
        auto s = admin.Stats();
        return s.ok() && s->transactions().halves_pending() == 0;
      },
      std::chrono::seconds(30), "no pending half on the new leader",
      std::chrono::milliseconds(100)));

  // Every visible message of "orders" on the new leader, by body: received and acked until a
  // whole second brings nothing more.
  SimpleConsumer consumer(follower->Options(), "g");
  client::ReceiveOptions ro;
  ro.max_messages = 16;
  ro.long_poll_ms = 1000;
  std::map<std::string, int> delivered;
  for (int empty_polls = 0; empty_polls < 2;) {
    auto got = consumer.Receive("orders", ro);
    ASSERT_TRUE(got.ok()) << got.status();
    if (got->empty()) {
      ++empty_polls;
      continue;
    }
    for (const client::ReceivedMessage& m : *got) {
      ++delivered[m.body];
      ASSERT_TRUE(consumer.Ack(m.receipt_handle).ok()) << m.body;
    }
  }
  EXPECT_EQ(delivered, (std::map<std::string, int>{
                           {"check-commit", 1}, {"committed-before", 1}, {"end-on-new", 1}}));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(checks.count("committed-before"), 0u);
    EXPECT_EQ(checks.count("end-on-new"), 0u);
    EXPECT_GE(checks["check-commit"], 1);
    EXPECT_GE(checks["check-rollback"], 1);
  }
  stats = admin.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->transactions().halves_pending(), 0);
  EXPECT_EQ(stats->transactions().commits(), 2);    // end-on-new, check-commit (this leader)
  EXPECT_EQ(stats->transactions().rollbacks(), 1);  // check-rollback
}

}  // namespace
}  // namespace tokimq
