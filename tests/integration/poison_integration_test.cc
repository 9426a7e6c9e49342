// Issue 14 against the real broker: a group name outside the name rule is refused at every
// entry point with the rule in the error, and a message the timer cannot deliver (its topic was
// deleted while it waited) is parked in tokimq_sys_poison while every other delayed message is
// still delivered.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "common/names.h"
#include "support/run_command.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::AdminClient;
using client::OutgoingMessage;
using client::Producer;
using client::ReceivedMessage;
using client::ReceiveOptions;
using client::SimpleConsumer;

constexpr int64_t kSecond = 1000;
constexpr char kRule[] = "a group name is 1..248 characters of [A-Za-z0-9._-]";

class PoisonIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<testing::BrokerProcess>(dir_.Join("data"));
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    Connect();
  }
  void Connect() {
    admin_ = std::make_unique<AdminClient>(broker_->Options());
    producer_ = std::make_unique<Producer>(broker_->Options());
  }
  void CreateTopic(const std::string& name) {
    proto::TopicConfig t;
    t.set_name(name);
    t.set_type(proto::DELAY);
    t.set_queues(1);
    auto created = admin_->CreateTopic(t);
    ASSERT_TRUE(created.ok()) << created.status();
  }
  void SendDelayed(const std::string& topic, const std::string& body, int64_t delay_ms) {
    OutgoingMessage m;
    m.topic = topic;
    m.body = body;
    m.delay_ms = delay_ms;
    auto r = producer_->Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // Long polls (bounded real time) until `want` messages arrived.
  std::vector<ReceivedMessage> ReceiveN(SimpleConsumer& c, const std::string& topic, size_t want) {
    std::vector<ReceivedMessage> all;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (all.size() < want && std::chrono::steady_clock::now() < deadline) {
      ReceiveOptions o;
      o.long_poll_ms = 1000;
      auto got = c.Receive(topic, o);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) break;
      for (ReceivedMessage& m : *got) all.push_back(std::move(m));
    }
    return all;
  }
  // The CLI, stdout and stderr together.
  std::pair<int, std::string> Cli(const std::string& args) {
    std::string cmd = std::string(TOKIMQ_CLI_BIN) + " --broker 127.0.0.1:" +
                      std::to_string(broker_->port()) + " " + args + " </dev/null 2>&1";
    testing::CommandResult r = testing::RunShell(cmd);
    return {r.exit_code, r.out};
  }
  proto::StatsResponse Stats() {
    auto st = admin_->Stats();
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? *st : proto::StatsResponse{};
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::BrokerProcess> broker_;
  std::unique_ptr<AdminClient> admin_;
  std::unique_ptr<Producer> producer_;
};

TEST_F(PoisonIntegrationTest, BadGroupIsRefusedEverywhereAndDelayedDeliveryGoesOn) {
  CreateTopic("T");
  // The repro through the CLI: refused before anything reaches the broker.
  auto [rc, out] = Cli("consume --group 'sp ace' --topic T --count 1");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("invalid group name 'sp ace': " + std::string(kRule)), std::string::npos)
      << out;
  std::tie(rc, out) = Cli("nack --group 'sp ace' --delay 1s 00ff");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find(kRule), std::string::npos) << out;

  // The broker refuses it too (a client that does not check).
  SimpleConsumer bad(broker_->Options(), "sp ace");
  ReceiveOptions now;
  now.long_poll_ms = 0;
  auto refused = bad.Receive("T", now);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(kRule), std::string::npos) << refused.status();
  for (const std::string& g : {std::string("a:b"), std::string("caf\xc3\xa9"), std::string(249, 'g')}) {
    EXPECT_EQ(SimpleConsumer(broker_->Options(), g).Receive("T", now).status().code(),
              absl::StatusCode::kInvalidArgument)
        << g;
  }
  EXPECT_EQ(SimpleConsumer(broker_->Options(), "good").Receive("no such", now).status().code(),
            absl::StatusCode::kInvalidArgument);

  // The repro as an older broker allowed it: consume and nack as 'sp ace'. Refused now; on a
  // broker without the fix the nack's retry copy (to "%RETRY%sp ace") stopped every timer.
  SendDelayed("T", "m1", 0);
  ReceiveOptions poll;
  poll.long_poll_ms = 1000;
  auto taken = bad.Receive("T", poll);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kInvalidArgument);
  if (taken.ok()) {
    for (const ReceivedMessage& m : *taken) (void)bad.Nack(m.receipt_handle, 1000);
  }
  ASSERT_TRUE(admin_->AdvanceClock(1 * kSecond).ok());

  // A valid group takes m1; nacking it under the bad name is refused, under its own it works.
  SimpleConsumer good(broker_->Options(), "good");
  auto first = ReceiveN(good, "T", 1);
  ASSERT_EQ(first.size(), 1u);
  absl::Status nack = bad.Nack(first[0].receipt_handle, 1000);
  EXPECT_EQ(nack.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nack.message().find(kRule), std::string::npos) << nack;
  ASSERT_TRUE(good.Nack(first[0].receipt_handle, 1000).ok());

  // Any 3 s delayed message is delivered (before the fix: never again, on any topic).
  SendDelayed("T", "d3", 3 * kSecond);
  ASSERT_TRUE(testing::AwaitTimerEnqueued(*admin_).ok());
  ASSERT_TRUE(admin_->AdvanceClock(3 * kSecond).ok());
  auto got = ReceiveN(good, "T", 2);
  std::set<std::string> bodies;
  for (const ReceivedMessage& m : got) bodies.insert(m.body);
  EXPECT_EQ(bodies, (std::set<std::string>{"m1", "d3"}));
  const proto::StatsResponse st = Stats();
  EXPECT_EQ(st.timer().pending(), 0);
  EXPECT_EQ(st.timer().poison_parked(), 0);
}

TEST_F(PoisonIntegrationTest, TopicDeletedWhileMessagesWaitIsParkedAndDeliveryGoesOn) {
  CreateTopic("gone");
  CreateTopic("T");
  SendDelayed("gone", "g1", 2 * kSecond);
  SendDelayed("gone", "g2", 2 * kSecond);
  SendDelayed("T", "t3", 3 * kSecond);
  ASSERT_TRUE(testing::AwaitTimerEnqueued(*admin_).ok());
  ASSERT_TRUE(admin_->DeleteTopic("gone").ok());
  ASSERT_TRUE(admin_->AdvanceClock(3 * kSecond).ok());

  SimpleConsumer good(broker_->Options(), "good");
  auto got = ReceiveN(good, "T", 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "t3");
  ASSERT_TRUE(good.Ack(got[0].receipt_handle).ok());

  // Operators see them: counted, and readable in the poison topic with the reason.
  proto::StatsResponse st = Stats();
  EXPECT_EQ(st.timer().poison_parked(), 2);
  EXPECT_EQ(st.poison_depth(), 2);
  EXPECT_EQ(st.timer().pending(), 0);
  auto [rc, out] = Cli("stats");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("poison: poison_parked=2 "), std::string::npos) << out;
  SimpleConsumer ops(broker_->Options(), "ops");
  auto parked = ReceiveN(ops, kPoisonTopic, 2);
  ASSERT_EQ(parked.size(), 2u);
  for (const ReceivedMessage& m : parked) {
    EXPECT_EQ(m.properties.at(kPoisonTopicProp), "gone");
    EXPECT_NE(m.properties.at(kPoisonReason).find("topic 'gone' does not exist"),
              std::string::npos);
    EXPECT_TRUE(m.body == "g1" || m.body == "g2") << m.body;
  }
  OutgoingMessage m;
  m.topic = kPoisonTopic;
  m.body = "x";
  EXPECT_EQ(producer_->Send(m).status().code(), absl::StatusCode::kInvalidArgument);

  // kill -9 and restart: the parked copies count as moved, nothing is parked twice.
  broker_->Kill();
  ASSERT_TRUE(broker_->Start());
  Connect();
  ASSERT_TRUE(admin_->AdvanceClock(5 * kSecond).ok());
  SendDelayed("T", "after", 1 * kSecond);
  ASSERT_TRUE(testing::AwaitTimerEnqueued(*admin_).ok());
  ASSERT_TRUE(admin_->AdvanceClock(1 * kSecond).ok());
  SimpleConsumer again(broker_->Options(), "good");
  auto later = ReceiveN(again, "T", 1);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].body, "after");
  EXPECT_EQ(Stats().poison_depth(), 2);
}

}  // namespace
}  // namespace tokimq
