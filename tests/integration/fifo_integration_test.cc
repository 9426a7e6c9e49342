// FIFO topics through the real broker: 100 message groups x 1000 messages,
// consumed by two consumers with random lease expiries; every group must be consumed in send
// order with no gaps, no loss and never two of its messages leased at once. Also the send-side
// rules for message groups. The broker runs on a manual clock: lease expiries happen when the
// test advances it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <fstream>
#include <mutex>
#include <shared_mutex>
#include <random>
#include <thread>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::AdminClient;
using client::OutgoingMessage;
using client::Producer;
using client::ReceiveOptions;
using client::SimpleConsumer;
using testing::BrokerProcess;

constexpr int64_t kSecond = 1000;

class FifoIntegrationTest : public ::testing::Test {
 protected:
  void StartBroker(const std::string& config_text) {
    std::string config = dir_.Join("broker.toml");
    {
      std::ofstream out(config);
      out << config_text;
    }
    broker_ = std::make_unique<BrokerProcess>(
        dir_.Join("data"), std::vector<std::string>{"--manual-clock", "--config", config});
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    admin_ = std::make_unique<AdminClient>(broker_->Options());
    producer_ = std::make_unique<Producer>(broker_->Options());
  }
  void CreateTopic(const std::string& name, proto::TopicType type, int queues) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(type);
    t.set_queues(queues);
    auto created = admin_->CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
  std::unique_ptr<AdminClient> admin_;
  std::unique_ptr<Producer> producer_;
};

TEST_F(FifoIntegrationTest, SendNeedsAGroupOnFifoTopicsAndRefusesOneElsewhere) {
  StartBroker("");
  CreateTopic("ff", proto::FIFO, 4);
  CreateTopic("plain", proto::NORMAL, 4);
  OutgoingMessage m;
  m.topic = "ff";
  m.body = "x";
  auto no_group = producer_->Send(m);
  EXPECT_EQ(no_group.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_group.status().message().find("message group"), absl::string_view::npos)
      << no_group.status();
  m.message_group = std::string(257, 'g');
  EXPECT_EQ(producer_->Send(m).status().code(), absl::StatusCode::kInvalidArgument);
  // One group always lands in one queue, whatever the key.
  m.message_group = "order-42";
  m.key = "k1";
  auto a = producer_->Send(m);
  m.key = "k2";
  auto b = producer_->Send(m);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->queue_id, b->queue_id);
  // The key is the group when no group is given.
  m.message_group.clear();
  m.key = "order-42";
  auto c = producer_->Send(m);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->queue_id, a->queue_id);
  m.message_group = "bad\ngroup";
  EXPECT_EQ(producer_->Send(m).status().code(), absl::StatusCode::kInvalidArgument);
  m.message_group = "order-42";
  m.properties["MSG_GROUP"] = "forged";  // reserved: the group is a field of its own
  EXPECT_EQ(producer_->Send(m).status().code(), absl::StatusCode::kInvalidArgument);
  m.properties.clear();
  m.topic = "plain";
  auto plain = producer_->Send(m);
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plain.status().message().find("FIFO"), absl::string_view::npos) << plain.status();

  SimpleConsumer consumer(broker_->Options(), "g");
  ReceiveOptions o;
  o.long_poll_ms = 2000;
  auto got = consumer.Receive("ff", o);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);  // three messages of one group: one at a time
  EXPECT_EQ((*got)[0].properties.at("MSG_GROUP"), "order-42");
  EXPECT_EQ((*got)[0].key, "k1");
}

TEST_F(FifoIntegrationTest, HundredGroupsStayInOrderThroughRandomLeaseExpiries) {
  // TOKIMQ_FIFO_GROUPS / TOKIMQ_FIFO_PER_GROUP shrink the run while debugging.
  const int kGroups = std::getenv("TOKIMQ_FIFO_GROUPS") ? std::atoi(std::getenv("TOKIMQ_FIFO_GROUPS")) : 100;
  const int kPerGroup = std::getenv("TOKIMQ_FIFO_PER_GROUP") ? std::atoi(std::getenv("TOKIMQ_FIFO_PER_GROUP")) : 1000;
  constexpr int64_t kInvisibleMs = 10 * kSecond;
  StartBroker("[group.fifo-workers]\nmax_attempts = 1000\nbackoff = [\"1s\"]\n");
  CreateTopic("ff", proto::FIFO, 8);

  // Interleaved sends: seq 0 of every group, then seq 1, ... in batches.
  std::vector<OutgoingMessage> batch;
  for (int seq = 0; seq < kPerGroup; ++seq) {
    for (int g = 0; g < kGroups; ++g) {
      OutgoingMessage m;
      m.topic = "ff";
      m.message_group = "grp-" + std::to_string(g);
      m.body = std::to_string(g) + ":" + std::to_string(seq);
      batch.push_back(std::move(m));
    }
    if (batch.size() >= 1000) {
      auto r = producer_->SendBatch(batch);
      ASSERT_TRUE(r.ok()) << r.status();
      batch.clear();
    }
  }

  std::mutex mu;
  std::vector<int> next(kGroups, 0);      // next sequence number each group must deliver
  std::vector<bool> held(kGroups, false);  // a consumer holds a live lease of the group
  std::vector<int> abandoned;              // groups whose lease we let expire
  std::atomic<int64_t> acked{0};
  std::atomic<bool> done{false};
  // Consumers hold it shared from receive to ack; the coordinator takes it exclusively to move
  // the clock, so only the leases it means to expire can expire.
  // (glibc's rwlock prefers readers: pause_requested keeps the consumers from starving it.)
  std::shared_mutex clock_mu;
  std::atomic<bool> pause_requested{false};
  std::string failure;
  auto fail = [&](const std::string& why) {
    if (failure.empty()) failure = why;
    done = true;
  };

  auto consume = [&](int id) {
    SimpleConsumer consumer(broker_->Options(), "fifo-workers");
    std::mt19937 rng(1000 + id);
    ReceiveOptions o;
    o.max_messages = 32;
    o.invisible_ms = kInvisibleMs;
    o.long_poll_ms = 100;
    while (!done) {
      while (pause_requested.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::shared_lock<std::shared_mutex> no_clock_moves(clock_mu);
      auto got = consumer.Receive("ff", o);
      if (!got.ok()) {
        std::lock_guard<std::mutex> l(mu);
        fail("receive: " + got.status().ToString());
        return;
      }
      std::vector<std::string> to_ack;
      std::vector<int> to_ack_groups;
      {
        std::lock_guard<std::mutex> l(mu);
        for (const auto& m : *got) {
          const size_t colon = m.body.find(':');
          const int g = std::stoi(m.body.substr(0, colon));
          const int seq = std::stoi(m.body.substr(colon + 1));
          if (held[g]) {
            fail("group " + std::to_string(g) + " handed out while leased (seq " +
                 std::to_string(seq) + ")");
            return;
          }
          if (seq != next[g]) {
            fail("group " + std::to_string(g) + " delivered seq " + std::to_string(seq) +
                 ", expected " + std::to_string(next[g]));
            return;
          }
          held[g] = true;
          if (rng() % 100 < 3) {
            abandoned.push_back(g);  // never acked: the lease expires, the message comes back
          } else {
            to_ack.push_back(m.receipt_handle);
            to_ack_groups.push_back(g);
          }
        }
      }
      if (to_ack.empty()) continue;
      // Release the groups before acking: once the ack is in, the next one may go to the other
      // consumer at once.
      {
        std::lock_guard<std::mutex> l(mu);
        for (int g : to_ack_groups) {
          held[g] = false;
          ++next[g];
        }
      }
      auto acks = consumer.AckBatch(to_ack);
      if (!acks.ok()) {
        std::lock_guard<std::mutex> l(mu);
        fail("ack: " + acks.status().ToString());
        return;
      }
      for (const absl::Status& s : *acks) {
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(mu);
          fail("ack refused: " + s.ToString());
          return;
        }
      }
      acked.fetch_add(static_cast<int64_t>(to_ack.size()));
    }
  };
  std::thread c1(consume, 1), c2(consume, 2);

  // Coordinator: every 200 ms of real time, pause the consumers and move the broker clock past
  // the invisible duration and the 1 s backoff. Leases the consumers hold are acked before they
  // release the pause, so only abandoned leases expire; their groups are free again for the
  // check below once the clock moved.
  int64_t expiries = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (!done && acked.load() < int64_t{kGroups} * kPerGroup) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (std::chrono::steady_clock::now() > deadline) {
      std::lock_guard<std::mutex> l(mu);
      fail("timed out with " + std::to_string(acked.load()) + " acked");
      break;
    }
    pause_requested = true;
    std::unique_lock<std::shared_mutex> pause(clock_mu);
    pause_requested = false;  // consumers queue on the lock until this iteration releases it
    {
      std::lock_guard<std::mutex> l(mu);
      for (int g : abandoned) held[g] = false;
      expiries += static_cast<int64_t>(abandoned.size());
      abandoned.clear();
    }
    if (std::getenv("TOKIMQ_FIFO_TRACE")) {
      std::fprintf(stderr, "acked=%lld expiries=%lld\n", static_cast<long long>(acked.load()),
                   static_cast<long long>(expiries));
    }
    auto moved = admin_->AdvanceClock(kInvisibleMs + 2 * kSecond);
    if (!moved.ok()) {
      std::lock_guard<std::mutex> l(mu);
      fail("advance clock: " + moved.status().ToString());
    }
  }
  done = true;
  c1.join();
  c2.join();
  ASSERT_TRUE(failure.empty()) << failure;
  EXPECT_EQ(acked.load(), int64_t{kGroups} * kPerGroup);
  for (int g = 0; g < kGroups; ++g) EXPECT_EQ(next[g], kPerGroup) << "group " << g;
  EXPECT_GT(expiries, int64_t{kGroups} * kPerGroup / 100) << "the test must exercise expiries";
  // Nothing left: no duplicate, no stray retry copy.
  SimpleConsumer check(broker_->Options(), "fifo-workers");
  ReceiveOptions o;
  o.long_poll_ms = 500;
  auto rest = check.Receive("ff", o);
  ASSERT_TRUE(rest.ok());
  EXPECT_TRUE(rest->empty()) << rest->size() << " left, first " << (*rest)[0].body;
  std::fprintf(stderr, "fifo: %lld acked, %lld lease expiries\n",
               static_cast<long long>(acked.load()), static_cast<long long>(expiries));
}

}  // namespace
}  // namespace tokimq
