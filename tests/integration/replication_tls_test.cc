// TLS between the members of a broker group (docs/replication.md "TLS between members"): a
// leader started with --tls-mode enforcing is followed by a follower that connects with TLS
// (replication_tls, its CA file); a follower without TLS, or one that trusts another CA, copies
// nothing and says why in replication_role's pull_error and its log, and keeps running.
// Certificates are made at test time (test_certificates.h).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "broker_process.h"
#include "client/admin.h"
#include "client/connection.h"
#include "client/producer.h"
#include "support/await.h"
#include "test_certificates.h"
#include "test_util.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using testing::AwaitTrue;
using testing::BrokerProcess;

absl::StatusOr<proto::ReplicationRoleResponse> Role(const client::ClientOptions& o,
                                                    proto::ReplicationRoleRequest r = {}) {
  auto conn = client::Connection::Open(o);
  if (!conn.ok()) return conn.status();
  proto::Request req;
  *req.mutable_replication_role() = r;
  auto resp = (*conn)->Call(std::move(req), 5000);
  if (!resp.ok()) return resp.status();
  return resp->replication_role();
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

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ReplicationTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCertificates(dir_.path()));
    leader_ = std::make_unique<BrokerProcess>(
        dir_.Join("leader"),
        std::vector<std::string>{"--broker-id", "0", "--replication", "async", "--grpc-port",
                                 "0", "--tls-cert", dir_.Join("server.pem"), "--tls-key",
                                 dir_.Join("server.key"), "--tls-mode", "enforcing"});
    ASSERT_TRUE(leader_->Start()) << ReadAll(dir_.Join("leader.log"));
    proto::TopicConfig t;
    t.set_name("orders");
    t.set_type(proto::DELAY);
    t.set_queues(2);
    ASSERT_TRUE(client::AdminClient(LeaderTls()).CreateTopic(t).ok());
    client::Producer producer(LeaderTls());
    for (int i = 0; i < 200; ++i) {
      client::OutgoingMessage m;
      m.topic = "orders";
      m.body = "order-" + std::to_string(i) + std::string(200, 'x');
      if (i % 2) m.delay_ms = 3'600'000;
      auto sent = producer.Send(m);
      ASSERT_TRUE(sent.ok()) << sent.status();
    }
    auto r = Role(LeaderTls());
    ASSERT_TRUE(r.ok()) << r.status();
    leader_end_ = r->max_offset();
    ASSERT_GT(leader_end_, 200 * 200);
  }
  client::ClientOptions LeaderTls() const {
    client::ClientOptions o = leader_->Options();
    o.tls = true;
    o.tls_ca_file = dir_.Join("ca.pem");
    return o;
  }
  // A follower (broker id 1, async) of the leader with `extra` flags.
  void StartFollower(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--broker-id", "1", "--replicate-from",
                                     "127.0.0.1:" + std::to_string(leader_->port()),
                                     "--replication", "async", "--grpc-port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    follower_ = std::make_unique<BrokerProcess>(dir_.Join("follower"), std::move(args));
    ASSERT_TRUE(follower_->Start()) << ReadAll(dir_.Join("follower.log"));
  }
  // Waits until the follower reports a pull error; returns its last answer.
  proto::ReplicationRoleResponse AwaitPullError() {
    proto::ReplicationRoleResponse last;
    EXPECT_TRUE(AwaitTrue(
        [&] {
          auto r = Role(follower_->Options());
          if (r.ok()) last = *r;
          return r.ok() && !r->pull_error().empty();
        },
        20s, "a pull error on the follower"));
    return last;
  }

  ::tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> leader_;
  std::unique_ptr<BrokerProcess> follower_;
  int64_t leader_end_ = 0;
};

TEST_F(ReplicationTlsTest, TlsFollowerCopiesTheLogOfAnEnforcingLeaderAndServesAfterPromotion) {
  StartFollower({"--replication-tls", "--replication-tls-ca", dir_.Join("ca.pem")});
  ASSERT_TRUE(AwaitTrue(
      [&] {
        auto r = Role(follower_->Options());
        return r.ok() && r->max_offset() >= leader_end_;
      },
      30s, "the follower at the leader's end"));
  auto f = Role(follower_->Options());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->role(), "follower");
  EXPECT_EQ(f->max_offset(), leader_end_);
  EXPECT_EQ(f->pull_error(), "");
  // The copy is byte for byte (the leader stopped first: nothing more to copy).
  EXPECT_EQ(leader_->Stop(), 0);
  auto a = SegmentFiles(dir_.Join("leader") + "/store/commitlog");
  auto b = SegmentFiles(dir_.Join("follower") + "/store/commitlog");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) EXPECT_TRUE(bytes == b[name]) << name << " differs";
  // Promoted, it serves: a send lands after the copied log.
  proto::ReplicationRoleRequest promote;
  promote.set_promote(true);
  promote.set_term(1);
  auto promoted = Role(follower_->Options(), promote);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  EXPECT_EQ(promoted->role(), "leader");
  proto::TopicConfig t;
  t.set_name("orders");
  t.set_type(proto::DELAY);
  t.set_queues(2);
  ASSERT_TRUE(client::AdminClient(follower_->Options()).CreateTopic(t).ok());
  client::Producer producer(follower_->Options());
  client::OutgoingMessage m;
  m.topic = "orders";
  m.body = "after promotion";
  absl::StatusOr<client::SendReceipt> sent;
  ASSERT_TRUE(AwaitTrue(
      [&] {
        sent = producer.Send(m);
        return sent.ok();
      },
      20s, "a send to the promoted follower"))
      << sent.status();
  auto after = Role(follower_->Options());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(after->max_offset(), leader_end_);
}

TEST_F(ReplicationTlsTest, EnforcingFollowerUsesTlsToItsLeaderByDefault) {
  // No --replication-tls: its own --tls-mode enforcing turns it on (ResolveTls).
  StartFollower({"--tls-cert", dir_.Join("server.pem"), "--tls-key", dir_.Join("server.key"),
                 "--tls-mode", "enforcing", "--replication-tls-ca", dir_.Join("ca.pem")});
  client::ClientOptions o = follower_->Options();
  o.tls = true;
  o.tls_ca_file = dir_.Join("ca.pem");
  ASSERT_TRUE(AwaitTrue(
      [&] {
        auto r = Role(o);
        return r.ok() && r->max_offset() >= leader_end_;
      },
      30s, "the follower at the leader's end"));
  auto f = Role(o);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->pull_error(), "");
}

TEST_F(ReplicationTlsTest, PlaintextFollowerOfAnEnforcingLeaderCopiesNothingAndSaysWhy) {
  StartFollower({"--no-replication-tls"});
  proto::ReplicationRoleResponse r = AwaitPullError();
  EXPECT_NE(r.pull_error().find("replication_tls"), std::string::npos) << r.pull_error();
  EXPECT_EQ(r.max_offset(), 0);
  EXPECT_EQ(r.role(), "follower");
  // Still running and still failing (no crash), and the log says it.
  auto again = Role(follower_->Options());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->max_offset(), 0);
  EXPECT_NE(again->pull_error(), "");
  const std::string log = ReadAll(dir_.Join("follower.log"));
  EXPECT_NE(log.find("replication: "), std::string::npos) << log;
  EXPECT_NE(log.find("replication_tls"), std::string::npos) << log;
}

TEST_F(ReplicationTlsTest, FollowerTrustingAnotherCaRefusesTheLeader) {
  StartFollower({"--replication-tls", "--replication-tls-ca", dir_.Join("other.pem")});
  proto::ReplicationRoleResponse r = AwaitPullError();
  EXPECT_NE(r.pull_error().find("certificate"), std::string::npos) << r.pull_error();
  EXPECT_EQ(r.max_offset(), 0);
  // The name check: the right CA, but a name the leader's certificate does not hold.
  follower_->Kill();
  std::filesystem::remove_all(dir_.Join("follower"));
  StartFollower({"--replication-tls", "--replication-tls-ca", dir_.Join("ca.pem"),
                 "--replication-tls-server-name", "mq.example.com"});
  r = AwaitPullError();
  EXPECT_NE(r.pull_error().find("certificate"), std::string::npos) << r.pull_error();
  EXPECT_EQ(r.max_offset(), 0);
}

}  // namespace
}  // namespace tokimq
