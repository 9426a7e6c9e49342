// A follower behind its leader's retention (docs/replication.md "A follower behind the leader's
// retention"): the leader (1 MiB segments, one-hour retention, manual clock) has removed its
// first segments when an empty replica joins. The follower starts its CommitLog at the
// leader's oldest retained segment, copies up to the leader's end, and after its promotion
// serves: the delayed messages sent before the retention (moved ahead of it by the timer
// store) are delivered once, at their time; acked messages are not delivered again; receipt
// handles of the old leader ack on the new one (the group state came with the snapshot the
// leader moved ahead of its retention).
#include <gtest/gtest.h>

#include <csignal>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "replication_support.h"
#include "support/await.h"
#include "test_util.h"

namespace tokimq {
namespace {

using namespace std::chrono_literals;
using client::AdminClient;
using client::OutgoingMessage;
using client::Producer;
using client::ReceiveOptions;
using client::SimpleConsumer;
using testing::AwaitTrue;
using testing::BrokerProcess;

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 24 * kHour;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ReplicationCatchUpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.Join("broker.toml");
    std::ofstream(config_) << "segment_size = 1048576\n"
                              "retention = \"1h\"\n"
                              "retention_interval = \"1m\"\n";
    leader_ = std::make_unique<BrokerProcess>(
        dir_.Join("leader"),
        std::vector<std::string>{"--manual-clock", "--config", config_, "--broker-id", "0",
                                 "--replication", "async", "--grpc-port", "0"});
    ASSERT_TRUE(leader_->Start()) << ReadAll(dir_.Join("leader.log"));
    CreateTopics(*leader_);
  }
  static void CreateTopics(const BrokerProcess& b) {
    AdminClient admin(b.Options());
    for (const auto& [name, type] : std::map<std::string, proto::TopicType>{
             {"fill", proto::NORMAL}, {"n", proto::NORMAL}, {"t", proto::DELAY}}) {
      proto::TopicConfig t;
      t.set_name(name);
      t.set_type(type);
      t.set_queues(1);
      t.set_max_delay_ms(3 * kDay);
      auto created = admin.CreateTopic(t);
      ASSERT_TRUE(created.ok()) << created.status();
    }
  }
  // Advances `b`'s clock and waits until a retention pass ran at or after the new time.
  proto::StatsResponse AdvanceAndAwaitRetention(const BrokerProcess& b, int64_t ms) {
    AdminClient admin(b.Options());
    EXPECT_TRUE(testing::AwaitTimerEnqueued(admin).ok());
    auto now = admin.AdvanceClock(ms);
    EXPECT_TRUE(now.ok()) << now.status();
    proto::StatsResponse st;
    EXPECT_TRUE(AwaitTrue(
        [&] {
          auto s = admin.Stats();
          if (s.ok()) st = *s;
          return now.ok() && s.ok() && s->retention_last_run_ms() >= *now;
        },
        30s, "a retention pass", 20ms));
    return st;
  }
  // Receives from `topic` as `group` on `b` until nothing more comes within a short poll.
  std::vector<client::ReceivedMessage> Drain(const BrokerProcess& b, const std::string& group,
                                             const std::string& topic, int64_t invisible_ms) {
    SimpleConsumer consumer(b.Options(), group);
    std::vector<client::ReceivedMessage> out;
    while (true) {
      ReceiveOptions o;
      o.max_messages = 32;
      o.long_poll_ms = 1500;
      o.invisible_ms = invisible_ms;
      auto got = consumer.Receive(topic, o);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok() || got->empty()) return out;
      out.insert(out.end(), got->begin(), got->end());
    }
  }

  ::tokimq::testing::TempDir dir_;
  std::string config_;
  std::unique_ptr<BrokerProcess> leader_;
  std::unique_ptr<BrokerProcess> follower_;
};

TEST_F(ReplicationCatchUpTest, EmptyFollowerStartsAtTheLeadersOldestSegmentAndServes) {
  Producer producer(leader_->Options());
  // Ten delayed messages in the first segment: the timer store keeps them (moved ahead of
  // retention, issue 24).
  std::set<std::string> delayed;
  for (int i = 0; i < 10; ++i) {
    OutgoingMessage m;
    m.topic = "t";
    m.body = "delayed-" + std::to_string(i);
    m.delay_ms = kDay;
    auto sent = producer.Send(m);
    ASSERT_TRUE(sent.ok()) << sent.status();
    ASSERT_TRUE(sent->delayed);
    delayed.insert(m.body);
  }
  for (int i = 0; i < 60; ++i) {  // 6 MB: segments 0-5
    OutgoingMessage m;
    m.topic = "fill";
    m.body = std::string(100'000, static_cast<char>('a' + i % 26));
    ASSERT_TRUE(producer.Send(m).ok());
  }
  proto::StatsResponse st = AdvanceAndAwaitRetention(*leader_, 2 * kHour);
  const int64_t leader_min = st.commitlog_min_offset();
  ASSERT_GE(leader_min, 5 << 20) << "the first segments are gone";
  EXPECT_EQ(st.timer().pending(), 10);
  // The group-state snapshot of term 0 was in segment 0: moved ahead, not pinned.
  EXPECT_NE(ReadAll(dir_.Join("leader.log")).find("moved ahead of retention"), std::string::npos);

  // Consumer state after the retention: 10 messages received under a 3 h lease, 6 acked.
  for (int i = 0; i < 10; ++i) {
    OutgoingMessage m;
    m.topic = "n";
    m.body = "n-" + std::to_string(i);
    ASSERT_TRUE(producer.Send(m).ok());
  }
  SimpleConsumer consumer(leader_->Options(), "g");
  std::vector<client::ReceivedMessage> leased = Drain(*leader_, "g", "n", 3 * kHour);
  ASSERT_EQ(leased.size(), 10u);
  std::set<std::string> acked;
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(consumer.Ack(leased[i].receipt_handle).ok());
    acked.insert(leased[i].body);
  }
  auto lr = testing::ReplicationRole(*leader_);
  ASSERT_TRUE(lr.ok()) << lr.status();
  const int64_t leader_end = lr->max_offset();
  auto leader_now = AdminClient(leader_->Options()).AdvanceClock(0);
  ASSERT_TRUE(leader_now.ok()) << leader_now.status();

  // An empty replica joins.
  follower_ = std::make_unique<BrokerProcess>(
      dir_.Join("follower"),
      std::vector<std::string>{"--manual-clock", "--manual-clock-start-ms",
                               std::to_string(*leader_now), "--config", config_, "--broker-id",
                               "1", "--replicate-from",
                               "127.0.0.1:" + std::to_string(leader_->port()), "--replication",
                               "async", "--grpc-port", "0"});
  ASSERT_TRUE(follower_->Start()) << ReadAll(dir_.Join("follower.log"));
  CreateTopics(*follower_);  // topic metadata is not replicated without etcd
  ASSERT_TRUE(testing::AwaitCopiedTo(*follower_, leader_end))
      << ReadAll(dir_.Join("follower.log"));
  auto fst = AdminClient(follower_->Options()).Stats();
  ASSERT_TRUE(fst.ok()) << fst.status();
  EXPECT_EQ(fst->commitlog_min_offset(), leader_min);
  EXPECT_EQ(fst->commitlog_max_offset(), leader_end);
  const std::string flog = ReadAll(dir_.Join("follower.log"));
  EXPECT_NE(flog.find("the CommitLog starts empty at offset " + std::to_string(leader_min)),
            std::string::npos)
      << flog;

  // The leader dies; the follower is promoted.
  leader_->Kill();
  auto promoted = testing::PromoteTo(*follower_, 1);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  ASSERT_EQ(promoted->role(), "leader");
  // Two of the old leader's four open handles ack on the new leader (the handle secret came
  // with the snapshot).
  SimpleConsumer on_new(follower_->Options(), "g");
  absl::Status ack;
  ASSERT_TRUE(AwaitTrue(
      [&] {
        ack = on_new.Ack(leased[6].receipt_handle);
        return ack.ok() || !absl::IsFailedPrecondition(ack);  // "becoming the leader": retry
      },
      20s, "the promoted follower serving"));
  ASSERT_TRUE(ack.ok()) << ack;
  ASSERT_TRUE(on_new.Ack(leased[7].receipt_handle).ok());
  acked.insert(leased[6].body);
  acked.insert(leased[7].body);
  // Leases still running, nothing due: nothing comes.
  EXPECT_TRUE(Drain(*follower_, "g", "n", kHour).empty());
  EXPECT_TRUE(Drain(*follower_, "g2", "t", kHour).empty());

  // Past the leases (3 h): only the two never-acked messages come back, attempt 2.
  AdminClient fadmin(follower_->Options());
  ASSERT_TRUE(fadmin.AdvanceClock(4 * kHour).ok());
  std::vector<client::ReceivedMessage> again;
  for (int round = 0; round < 10 && again.size() < 2; ++round) {
    auto more = Drain(*follower_, "g", "n", kHour);
    again.insert(again.end(), more.begin(), more.end());
    if (again.size() < 2) {
      ASSERT_TRUE(fadmin.AdvanceClock(60'000).ok());  // the retry backoff
    }
  }
  ASSERT_EQ(again.size(), 2u);
  for (const auto& m : again) {
    EXPECT_EQ(acked.count(m.body), 0u) << m.body << " was acked";
    EXPECT_EQ(m.delivery_attempt, 2) << m.body;
  }
  EXPECT_TRUE(Drain(*follower_, "g2", "t", kHour).empty()) << "a delayed message came early";

  // A day after the send: the ten delayed messages, once each.
  ASSERT_TRUE(fadmin.AdvanceClock(kDay).ok());
  std::map<std::string, int> seen;
  for (int round = 0; round < 10 && seen.size() < delayed.size(); ++round) {
    for (const auto& m : Drain(*follower_, "g2", "t", kHour)) {
      ++seen[m.body];
      EXPECT_TRUE(SimpleConsumer(follower_->Options(), "g2").Ack(m.receipt_handle).ok());
    }
  }
  EXPECT_EQ(seen.size(), delayed.size());
  for (const auto& [body, n] : seen) {
    EXPECT_EQ(delayed.count(body), 1u) << body;
    EXPECT_EQ(n, 1) << body << " delivered " << n << " times";
  }
  EXPECT_EQ(ReadAll(dir_.Join("follower.log")).find("leading with a group state marked stale"),
            std::string::npos);
}

// A running follower falls behind the leader's retention (here: frozen with SIGSTOP while the
// leader's retention removes the segments it had not copied): its next pull is refused
// (NOT_FOUND), it restarts itself, moves its old store aside and copies from the leader's
// oldest offset.
TEST_F(ReplicationCatchUpTest, FollowerDownLongerThanTheRetentionRestartsAtTheOldestSegment) {
  auto leader_now = AdminClient(leader_->Options()).AdvanceClock(0);
  ASSERT_TRUE(leader_now.ok()) << leader_now.status();
  follower_ = std::make_unique<BrokerProcess>(
      dir_.Join("follower"),
      std::vector<std::string>{"--manual-clock", "--manual-clock-start-ms",
                               std::to_string(*leader_now), "--config", config_, "--broker-id",
                               "1", "--replicate-from",
                               "127.0.0.1:" + std::to_string(leader_->port()), "--replication",
                               "async", "--grpc-port", "0"});
  ASSERT_TRUE(follower_->Start()) << ReadAll(dir_.Join("follower.log"));
  Producer producer(leader_->Options());
  auto fill = [&](int n) {
    for (int i = 0; i < n; ++i) {
      OutgoingMessage m;
      m.topic = "fill";
      m.body = std::string(100'000, static_cast<char>('a' + i % 26));
      ASSERT_TRUE(producer.Send(m).ok());
    }
  };
  fill(5);
  auto lr = testing::ReplicationRole(*leader_);
  ASSERT_TRUE(lr.ok()) << lr.status();
  ASSERT_TRUE(testing::AwaitCopiedTo(*follower_, lr->max_offset()));
  const int64_t copied = lr->max_offset();

  ASSERT_EQ(::kill(follower_->pid(), SIGSTOP), 0);
  fill(40);
  proto::StatsResponse st = AdvanceAndAwaitRetention(*leader_, 2 * kHour);
  const int64_t leader_min = st.commitlog_min_offset();
  ASSERT_GT(leader_min, copied) << "the follower's end must be below the leader's retention";
  fill(3);
  lr = testing::ReplicationRole(*leader_);
  ASSERT_TRUE(lr.ok()) << lr.status();
  ASSERT_EQ(::kill(follower_->pid(), SIGCONT), 0);

  ASSERT_TRUE(testing::AwaitCopiedTo(*follower_, lr->max_offset(), 60s))
      << ReadAll(dir_.Join("follower.log"));
  const std::string flog = ReadAll(dir_.Join("follower.log"));
  EXPECT_NE(flog.find("below the oldest offset " + std::to_string(leader_min)), std::string::npos)
      << flog;
  EXPECT_NE(flog.find("restarting this broker"), std::string::npos) << flog;
  EXPECT_NE(flog.find("the old store moved aside to"), std::string::npos) << flog;
  auto fst = AdminClient(follower_->Options()).Stats();
  ASSERT_TRUE(fst.ok()) << fst.status();
  EXPECT_EQ(fst->commitlog_min_offset(), leader_min);
  // The old store is kept aside, not deleted.
  bool aside = false;
  for (const auto& e : std::filesystem::directory_iterator(dir_.Join("follower"))) {
    if (e.path().filename().string().rfind("replaced-", 0) == 0) {
      aside = std::filesystem::exists(e.path() / "store" / "commitlog");
    }
  }
  EXPECT_TRUE(aside);
}

}  // namespace
}  // namespace tokimq
