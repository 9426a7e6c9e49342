// A deposed leader comes back through the follower path (issue 20, docs/replication.md
// "Deposed leaders"), and the replication ack mode applies to recalls and to an explicitly
// configured async group: real brokers on loopback, roles set by the replication_role admin
// request (no etcd).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "broker_process.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "replication_support.h"
#include "support/await.h"
#include "test_util.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using client::OutgoingMessage;
using client::Producer;
using client::SimpleConsumer;
using testing::AwaitCopiedTo;
using testing::AwaitTrue;
using testing::BrokerProcess;
using testing::FollowIn;
using testing::PromoteTo;
using testing::ReplicationRole;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> ReplicaArgs(int id, const std::string& mode, int leader_port) {
  std::vector<std::string> args = {"--broker-id", std::to_string(id), "--replication", mode,
                                   "--grpc-port", "0"};
  if (leader_port > 0) {
    args.insert(args.end(), {"--replicate-from", "127.0.0.1:" + std::to_string(leader_port)});
  }
  return args;
}

void SendAll(const BrokerProcess& b, const std::string& prefix, int n, int64_t delay_ms) {
  Producer producer(b.Options());
  for (int i = 0; i < n; ++i) {
    OutgoingMessage m;
    m.topic = "orders";
    m.body = prefix + std::to_string(i);
    m.delay_ms = delay_ms;
    auto sent = producer.Send(m);
    ASSERT_TRUE(sent.ok()) << sent.status();
  }
}

// Receives (group "g") and acks until `n` messages were acked or 30 s passed; returns the
// bodies acked.
std::set<std::string> ReceiveAndAck(const BrokerProcess& b, size_t n) {
  SimpleConsumer consumer(b.Options(), "g");
  std::set<std::string> acked;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (acked.size() < n && std::chrono::steady_clock::now() < deadline) {
    client::ReceiveOptions o;
    o.max_messages = 32;
    o.long_poll_ms = 500;
    auto got = consumer.Receive("orders", o);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) break;
    for (const auto& r : *got) {
      EXPECT_TRUE(consumer.Ack(r.receipt_handle).ok());
      acked.insert(r.body);
    }
  }
  return acked;
}

class DeposedLeaderTest : public ::testing::Test {
 protected:
  void CreateTopicOn(const BrokerProcess& b) {
    absl::Status created = testing::CreateTopic(b, "orders", proto::DELAY, 1);
    ASSERT_TRUE(created.ok()) << created;
  }
  ::tokimq::testing::TempDir dir_;
};

// Leader A, follower B (async). A's consumers ack 10 messages; B is promoted (term 1) and A is
// told to follow it: A restarts itself and copies B's writes, among them B's releases of 10
// delayed messages and B's acks of them and of 5 new sends. Promoted again (term 2), A serves
// B's state: nothing acked on B comes again, no message B released is released a second time,
// and a new delayed send is delivered once. Without the restart A kept its consumer service
// and timer store of term 0 and delivered B's acked messages again.
TEST_F(DeposedLeaderTest, LeaderDeposedAndPromotedAgainServesTheNewLeadersState) {
  BrokerProcess a(dir_.Join("a"), ReplicaArgs(0, "async", 0));
  ASSERT_TRUE(a.Start());
  BrokerProcess b(dir_.Join("b"), ReplicaArgs(1, "async", a.port()));
  ASSERT_TRUE(b.Start());
  CreateTopicOn(a);
  CreateTopicOn(b);

  SendAll(a, "now-", 10, 0);
  SendAll(a, "later-", 10, 2'500);  // released after A is deposed: by B
  EXPECT_EQ(ReceiveAndAck(a, 10).size(), 10u);
  auto a_role = ReplicationRole(a);
  ASSERT_TRUE(a_role.ok()) << a_role.status();
  ASSERT_TRUE(AwaitCopiedTo(b, a_role->max_offset()));

  auto promoted = PromoteTo(b, 1);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  auto deposed = FollowIn(a, 1, b);
  ASSERT_TRUE(deposed.ok()) << deposed.status();

  SendAll(b, "b-", 5, 0);
  const std::set<std::string> acked_on_b = ReceiveAndAck(b, 15);
  EXPECT_EQ(acked_on_b.size(), 15u);  // 10 released by B, 5 sent to B
  auto b_role = ReplicationRole(b);
  ASSERT_TRUE(b_role.ok()) << b_role.status();

  // A came back as B's follower (a new process image, same pid and port) and copied it all.
  ASSERT_TRUE(AwaitCopiedTo(a, b_role->max_offset(), 60s)) << ReadFile(a.log_path());
  const std::string a_log = ReadFile(a.log_path());
  EXPECT_NE(a_log.find("restarting as a follower of " + b.Options().broker), std::string::npos);
  auto back = ReplicationRole(a);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->term(), 1);
  EXPECT_FALSE(back->diverged());

  ASSERT_TRUE(PromoteTo(a, 2).ok());
  ASSERT_TRUE(FollowIn(b, 2, a).ok());  // B served: it restarts too
  ASSERT_TRUE(AwaitTrue(
      [&] {
        auto r = ReplicationRole(a);
        return r.ok() && r->role() == "leader" && r->term() == 2;
      },
      10s, "A leading term 2"));
  {
    SimpleConsumer consumer(a.Options(), "g");
    for (int poll = 0; poll < 3; ++poll) {  // past the 2.5 s delays, which B released
      client::ReceiveOptions o;
      o.max_messages = 32;
      o.long_poll_ms = 1'000;
      auto got = consumer.Receive("orders", o);
      ASSERT_TRUE(got.ok()) << got.status();
      for (const auto& r : *got) ADD_FAILURE() << "delivered again on A: " << r.body;
    }
  }
  SendAll(a, "a2-", 1, 300);
  const std::set<std::string> fresh = ReceiveAndAck(a, 1);
  EXPECT_EQ(fresh, (std::set<std::string>{"a2-0"}));
}

// Sync mode: a recall is answered once a follower holds its delete marker; with the follower
// gone, UNAVAILABLE after replication_ack_timeout (the recall still stands on the leader).
TEST_F(DeposedLeaderTest, SyncRecallWaitsForAFollower) {
  const std::string cfg = dir_.Join("leader.toml");
  std::ofstream(cfg) << "replication_ack_timeout = \"700ms\"\n";
  std::vector<std::string> leader_args = ReplicaArgs(0, "sync", 0);
  leader_args.insert(leader_args.begin(), {"-c", cfg});
  BrokerProcess a(dir_.Join("a"), leader_args);
  ASSERT_TRUE(a.Start());
  auto follower = std::make_unique<BrokerProcess>(dir_.Join("b"),
                                                  ReplicaArgs(1, "sync", a.port()));
  ASSERT_TRUE(follower->Start());
  CreateTopicOn(a);
  Producer producer(a.Options());
  auto send = [&](const std::string& body) {
    OutgoingMessage m;
    m.topic = "orders";
    m.body = body;
    m.delay_ms = 3'600'000;
    return producer.Send(m);
  };
  auto kept = send("recalled-with-follower");
  ASSERT_TRUE(kept.ok()) << kept.status();
  auto orphan = send("recalled-alone");
  ASSERT_TRUE(orphan.ok()) << orphan.status();

  ASSERT_TRUE(producer.Recall(kept->recall_handle).ok());
  auto leader_end = ReplicationRole(a);
  ASSERT_TRUE(leader_end.ok());
  auto follower_end = ReplicationRole(*follower);
  ASSERT_TRUE(follower_end.ok());
  // Answered only once the follower held every byte, the recall's marker the last of them.
  EXPECT_EQ(follower_end->max_offset(), leader_end->max_offset());

  follower->Kill();
  const auto start = std::chrono::steady_clock::now();
  const absl::Status alone = producer.Recall(orphan->recall_handle);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(alone.code(), absl::StatusCode::kUnavailable) << alone;
  EXPECT_GE(waited, 600ms);
  // It stands on the leader: recalled once, a second recall says so.
  const absl::Status again = producer.Recall(orphan->recall_handle);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
}

// `--replication async` given explicitly makes a lone broker id 0 a group member: its consumer
// state goes into the CommitLog (an ack appends a group-state record); without the option the
// same broker is a single node and an ack appends nothing.
TEST_F(DeposedLeaderTest, ExplicitAsyncLeaderLogsGroupStateAndASingleNodeDoesNot) {
  for (const bool explicit_mode : {true, false}) {
    SCOPED_TRACE(explicit_mode ? "--replication async" : "no --replication");
    std::vector<std::string> args = {"--grpc-port", "0"};
    if (explicit_mode) args.insert(args.end(), {"--replication", "async"});
    BrokerProcess broker(dir_.Join(explicit_mode ? "explicit" : "single"), args);
    ASSERT_TRUE(broker.Start());
    CreateTopicOn(broker);
    SendAll(broker, "m-", 1, 0);
    auto before = ReplicationRole(broker);
    ASSERT_TRUE(before.ok()) << before.status();
    EXPECT_EQ(ReceiveAndAck(broker, 1).size(), 1u);
    auto after = ReplicationRole(broker);
    ASSERT_TRUE(after.ok()) << after.status();
    if (explicit_mode) {
      EXPECT_GT(after->max_offset(), before->max_offset());
    } else {
      EXPECT_EQ(after->max_offset(), before->max_offset());
    }
    EXPECT_EQ(broker.Stop(), 0);
  }
}

}  // namespace
}  // namespace tokimq
