// Replication between two real brokers on loopback (issue 20, docs/replication.md): a follower's
// CommitLog is byte for byte its leader's; with replication = sync a kill -9 of the leader
// under a delayed-message load loses no acknowledged message after the follower is promoted,
// and nothing is delivered early.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "broker_process.h"
#include "client/admin.h"
#include "client/connection.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "support/await.h"
#include "test_util.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using client::AdminClient;
using client::OutgoingMessage;
using client::Producer;
using client::SimpleConsumer;
using testing::AwaitTrue;
using testing::BrokerProcess;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<proto::ReplicationRoleResponse> Role(const BrokerProcess& b,
                                                    proto::ReplicationRoleRequest r = {}) {
  auto conn = client::Connection::Open(b.Options());
  if (!conn.ok()) return conn.status();
  proto::Request req;
  *req.mutable_replication_role() = r;
  auto resp = (*conn)->Call(std::move(req), 5000);
  if (!resp.ok()) return resp.status();
  return resp->replication_role();
}

// Promotes `b` to leader of `term` (what the election does in cluster mode).
absl::StatusOr<proto::ReplicationRoleResponse> Promote(const BrokerProcess& b, int64_t term) {
  proto::ReplicationRoleRequest promote;
  promote.set_promote(true);
  promote.set_term(term);
  return Role(b, promote);
}

// Waits (bounded real time) until the follower's CommitLog end reaches `offset`.
::testing::AssertionResult AwaitFollowerAt(const BrokerProcess& follower, int64_t offset) {
  return AwaitTrue(
      [&] {
        auto r = Role(follower);
        return r.ok() && r->max_offset() >= offset;
      },
      20s, "the follower at offset " + std::to_string(offset));
}

// The flags of a replica with broker id `id` that copies from 127.0.0.1:`leader_port`.
std::vector<std::string> FollowerArgs(int id, int leader_port) {
  return {"--broker-id",      std::to_string(id),
          "--replicate-from", "127.0.0.1:" + std::to_string(leader_port),
          "--grpc-port",      "0"};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::map<std::string, std::string> SegmentFiles(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() != 20) continue;
    std::ifstream in(e.path(), std::ios::binary);
    out[name] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return out;
}

// Both brokers stopped: their CommitLog segment files hold the same bytes.
void ExpectSameCommitLog(const std::string& a_dir, const std::string& b_dir) {
  auto a = SegmentFiles(a_dir + "/store/commitlog");
  auto b = SegmentFiles(b_dir + "/store/commitlog");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) EXPECT_TRUE(bytes == b[name]) << name << " differs";
}

// Receives from `b` (group "g", topic "orders") until every body of `acked` was seen or 30 s
// passed; counts lost, early (received before its deliver time) and duplicated messages.
struct History {
  int lost = 0, early = 0, duplicated = 0;
};
History ConsumeAll(const BrokerProcess& b, const std::map<std::string, int64_t>& acked) {
  SimpleConsumer consumer(b.Options(), "g");
  std::map<std::string, int> seen;
  History h;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  size_t found = 0;
  while (found < acked.size() && std::chrono::steady_clock::now() < deadline) {
    client::ReceiveOptions o;
    o.max_messages = 32;
    o.long_poll_ms = 500;
    auto got = consumer.Receive("orders", o);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) break;
    const int64_t now = NowMs();
    for (const auto& r : *got) {
      auto it = acked.find(r.body);
      if (++seen[r.body] == 1 && it != acked.end()) ++found;
      if (it != acked.end() && now < it->second) ++h.early;
      EXPECT_TRUE(consumer.Ack(r.receipt_handle).ok());
    }
  }
  // Late duplicates: one more short poll.
  client::ReceiveOptions o;
  o.max_messages = 32;
  o.long_poll_ms = 300;
  if (auto got = consumer.Receive("orders", o); got.ok()) {
    for (const auto& r : *got) ++seen[r.body];
  }
  for (const auto& [body, at] : acked) h.lost += seen.count(body) ? 0 : 1;
  for (const auto& [body, n] : seen) h.duplicated += n > 1 ? 1 : 0;
  return h;
}

class ReplicationIntegrationTest : public ::testing::Test {
 protected:
  void StartPair(const std::string& mode) {
    leader_ = std::make_unique<BrokerProcess>(
        dir_.Join("leader"), std::vector<std::string>{"--broker-id", "0", "--replication", mode,
                                                      "--grpc-port", "0"});
    ASSERT_TRUE(leader_->Start());
    std::vector<std::string> args = FollowerArgs(1, leader_->port());
    args.insert(args.end(), {"--replication", mode});
    follower_ = std::make_unique<BrokerProcess>(dir_.Join("follower"), std::move(args));
    ASSERT_TRUE(follower_->Start());
    // Topic metadata is not replicated (etcd will hold it, issue 19): create it on both.
    for (const BrokerProcess* b : {leader_.get(), follower_.get()}) {
      absl::Status created = testing::CreateTopic(*b, "orders", proto::DELAY, 2);
      ASSERT_TRUE(created.ok()) << created;
    }
  }

  // Sync mode answers receives and acks only once a follower holds their group-state records
  // (docs/replication.md "Consumer-group state"): a promoted follower gets a follower of its
  // own (an empty replica that copies its log) before consumers use it.
  void AddFollowerOfPromoted() {
    std::vector<std::string> args = FollowerArgs(2, follower_->port());
    args.insert(args.end(), {"--replication", "sync"});
    third_ = std::make_unique<BrokerProcess>(dir_.Join("third"), std::move(args));
    ASSERT_TRUE(third_->Start());
    auto r = Role(*follower_);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(AwaitFollowerAt(*third_, r->max_offset()));
  }

  ::tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> leader_;
  std::unique_ptr<BrokerProcess> follower_;
  std::unique_ptr<BrokerProcess> third_;
};

TEST_F(ReplicationIntegrationTest, FollowerCommitLogIsByteIdenticalAndRefusesSends) {
  StartPair("async");
  Producer producer(leader_->Options());
  for (int i = 0; i < 300; ++i) {
    OutgoingMessage m;
    m.topic = "orders";
    m.body = "order-" + std::to_string(i) + std::string(static_cast<size_t>(i % 50), 'x');
    if (i % 2) m.delay_ms = 3'600'000;
    ASSERT_TRUE(producer.Send(m).ok());
  }
  auto leader_role = Role(*leader_);
  ASSERT_TRUE(leader_role.ok()) << leader_role.status();
  EXPECT_EQ(leader_role->role(), "leader");
  ASSERT_TRUE(AwaitFollowerAt(*follower_, leader_role->max_offset()));

  Producer to_follower(follower_->Options());
  OutgoingMessage m;
  m.topic = "orders";
  m.body = "refused";
  auto refused = to_follower.Send(m);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();

  EXPECT_EQ(leader_->Stop(), 0);
  EXPECT_EQ(follower_->Stop(), 0);
  ExpectSameCommitLog(dir_.Join("leader"), dir_.Join("follower"));
}

TEST_F(ReplicationIntegrationTest, SyncLeaderKilledFollowerPromotedLosesNoAckedMessage) {
  StartPair("sync");
  const int64_t delay_ms = 4000;
  std::map<std::string, int64_t> acked;  // body -> deliver_at_ms
  {
    Producer producer(leader_->Options());
    const int64_t start = NowMs();
    for (int i = 0; NowMs() - start < 1500 && i < 2000; ++i) {
      OutgoingMessage m;
      m.topic = "orders";
      m.body = "order-" + std::to_string(i);
      m.delay_ms = delay_ms;
      auto sent = producer.Send(m);
      if (sent.ok()) acked[m.body] = sent->deliver_at_ms;
    }
    leader_->Kill();  // kill -9 with sends acknowledged just before
  }
  ASSERT_GT(acked.size(), 10u);
  auto promoted = Promote(*follower_, 1);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  EXPECT_EQ(promoted->role(), "leader");
  EXPECT_EQ(promoted->term(), 1);
  {
    // A send to the promoted follower in sync mode has no follower yet: refused, not acked.
    Producer producer(follower_->Options());
    OutgoingMessage m;
    m.topic = "orders";
    m.body = "no follower";
    EXPECT_EQ(producer.Send(m).status().code(), absl::StatusCode::kUnavailable);
  }
  AddFollowerOfPromoted();

  History h = ConsumeAll(*follower_, acked);
  EXPECT_EQ(h.lost, 0) << "of " << acked.size() << " acknowledged";
  EXPECT_EQ(h.early, 0);
  EXPECT_EQ(h.duplicated, 0);
}

TEST_F(ReplicationIntegrationTest, LeaderKilledAfterReleasesPromotedFollowerRepeatsNone) {
  StartPair("sync");
  std::map<std::string, int64_t> acked;  // body -> deliver_at_ms
  int64_t short_delays = 0;
  {
    Producer producer(leader_->Options());
    const int64_t start = NowMs();
    for (int i = 0; NowMs() - start < 1000 && i < 1000; ++i) {
      OutgoingMessage m;
      m.topic = "orders";
      m.body = "order-" + std::to_string(i);
      m.delay_ms = i % 2 ? 200 : 4000;  // half released by the leader before it dies
      auto sent = producer.Send(m);
      if (sent.ok()) {
        acked[m.body] = sent->deliver_at_ms;
        short_delays += i % 2;
      }
    }
  }
  ASSERT_GT(acked.size(), 10u);
  // The 200 ms ones are released (moved to their real topic) by the leader.
  AdminClient leader_admin(leader_->Options());
  ASSERT_TRUE(AwaitTrue(
      [&] {
        auto st = leader_admin.Stats();
        return st.ok() && st->timer().delivered() >= short_delays;
      },
      20s, "the leader's releases of the 200 ms messages"));
  auto leader_role = Role(*leader_);
  ASSERT_TRUE(leader_role.ok()) << leader_role.status();
  // The releases are in the follower's copy (a release is not a send: nobody waits for it).
  ASSERT_TRUE(AwaitFollowerAt(*follower_, leader_role->max_offset()));
  leader_->Kill();
  auto promoted = Promote(*follower_, 1);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  AddFollowerOfPromoted();
  History h = ConsumeAll(*follower_, acked);
  EXPECT_EQ(h.lost, 0) << "of " << acked.size() << " acknowledged";
  EXPECT_EQ(h.early, 0);
  EXPECT_EQ(h.duplicated, 0);
}

TEST_F(ReplicationIntegrationTest, OldLeaderRejoinsAsFollowerAndDropsItsDivergedTail) {
  StartPair("async");
  auto send = [](const BrokerProcess& b, const std::string& prefix, int n) {
    Producer producer(b.Options());
    for (int i = 0; i < n; ++i) {
      OutgoingMessage m;
      m.topic = "orders";
      m.body = prefix + std::to_string(i);
      if (i % 3 == 0) m.delay_ms = 3'600'000;
      ASSERT_TRUE(producer.Send(m).ok());
    }
  };
  send(*leader_, "common-", 100);
  auto r = Role(*leader_);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(AwaitFollowerAt(*follower_, r->max_offset()));
  const int64_t common_end = r->max_offset();
  // The follower stops; the leader acknowledges more (async) that nobody copies, then dies.
  EXPECT_EQ(follower_->Stop(), 0);
  send(*leader_, "lost-", 40);
  leader_->Kill();
  // The follower comes back and is promoted (term 1); it takes new sends.
  follower_ = std::make_unique<BrokerProcess>(dir_.Join("follower"), FollowerArgs(1, 1));
  ASSERT_TRUE(follower_->Start());
  ASSERT_TRUE(Promote(*follower_, 1).ok());
  send(*follower_, "new-", 30);
  // The old leader restarts as the new leader's follower: its 40 diverged messages go.
  leader_ =
      std::make_unique<BrokerProcess>(dir_.Join("leader"), FollowerArgs(2, follower_->port()));
  ASSERT_TRUE(leader_->Start()) << ReadFile(leader_->log_path());
  auto new_leader = Role(*follower_);
  ASSERT_TRUE(new_leader.ok());
  ASSERT_GT(new_leader->max_offset(), common_end);
  ASSERT_TRUE(AwaitFollowerAt(*leader_, new_leader->max_offset()));
  auto rejoined = Role(*leader_);
  ASSERT_TRUE(rejoined.ok());
  EXPECT_EQ(rejoined->role(), "follower");
  EXPECT_EQ(rejoined->term(), 1);
  EXPECT_FALSE(rejoined->diverged());
  EXPECT_EQ(rejoined->max_offset(), new_leader->max_offset());
  EXPECT_NE(ReadFile(leader_->log_path()).find("rejoin: cut"), std::string::npos);
  EXPECT_EQ(leader_->Stop(), 0);
  EXPECT_EQ(follower_->Stop(), 0);
  ExpectSameCommitLog(dir_.Join("leader"), dir_.Join("follower"));
}

TEST(ReplicationAuthTest, PullsNeedTheClusterAdminUserWhenAuthIsOn) {
  ::tokimq::testing::TempDir dir;
  BrokerProcess leader(dir.Join("leader"),
                       {"--broker-id", "0", "--auth", "--auth-init-user", "root:root-secret",
                        "--grpc-port", "0"});
  ASSERT_TRUE(leader.Start());
  auto follower_with = [&](const std::string& name, const std::string& toml) {
    const std::string cfg = dir.Join(name + ".toml");
    std::ofstream(cfg) << toml;
    std::vector<std::string> args = FollowerArgs(1, leader.port());
    args.insert(args.begin(), {"-c", cfg});
    return std::make_unique<BrokerProcess>(dir.Join(name), std::move(args));
  };
  auto with_user = follower_with("with", "replication_access_key = \"root\"\n"
                                         "replication_secret_key = \"root-secret\"\n");
  auto without = follower_with("without", "");
  ASSERT_TRUE(with_user->Start());
  ASSERT_TRUE(without->Start());
  client::ClientOptions root = leader.Options();
  root.access_key = "root";
  root.secret_key = "root-secret";
  {
    AdminClient admin(root);
    proto::TopicConfig t;
    t.set_name("orders");
    t.set_queues(1);
    t.set_type(proto::NORMAL);
    auto created = admin.CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
    Producer producer(root);
    OutgoingMessage m;
    m.topic = "orders";
    m.body = "replicated only to an authenticated follower";
    ASSERT_TRUE(producer.Send(m).ok());
  }
  auto conn = client::Connection::Open(root);
  ASSERT_TRUE(conn.ok());
  proto::Request req;
  req.mutable_replication_role();
  auto r = (*conn)->Call(std::move(req), 5000);
  ASSERT_TRUE(r.ok());
  const int64_t end = r->replication_role().max_offset();
  ASSERT_GT(end, 0);
  // Role requests are cluster admin too: ask the followers as root would (auth is off there).
  EXPECT_TRUE(AwaitFollowerAt(*with_user, end));
  auto other = Role(*without);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->max_offset(), 0);
  EXPECT_NE(ReadFile(without->log_path()).find("requires authentication"), std::string::npos);
}

}  // namespace
}  // namespace tokimq
