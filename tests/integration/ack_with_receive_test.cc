// Acks carried by a receive (ReceiveRequest.ack_receipt_handles, docs/protocol.md "Acks
// carried by a receive") through the real broker binary and the C++ client's AckAndReceive:
// each handle's result as an AckRequest would give it, applied once even when the receive
// waits out its long poll, none applied when the receive is refused, and in a FIFO topic the
// next message of the acked message group in the same answer.
#include <gtest/gtest.h>

#include <chrono>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::OutgoingMessage;
using client::ReceivedMessage;
using client::ReceiveOptions;
using client::SimpleConsumer;
using testing::BrokerProcess;

class AckWithReceiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(dir_.Join("data"),
                                              std::vector<std::string>{"--manual-clock"});
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    admin_ = std::make_unique<client::AdminClient>(broker_->Options());
    producer_ = std::make_unique<client::Producer>(broker_->Options());
  }
  void CreateTopic(const std::string& name, proto::TopicType type) {
    absl::Status created = testing::CreateTopic(*broker_, name, type, 1);
    ASSERT_TRUE(created.ok()) << created;
  }
  void Send(const std::string& topic, const std::string& body, const std::string& group = "") {
    OutgoingMessage m;
    m.topic = topic;
    m.body = body;
    m.message_group = group;
    auto r = producer_->Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  static ReceiveOptions Options(int max, int64_t long_poll_ms) {
    ReceiveOptions o;
    o.max_messages = max;
    o.long_poll_ms = long_poll_ms;
    o.invisible_ms = 60'000;
    return o;
  }
  // Receives until `n` messages arrived (each long poll up to 2 s; 30 s at most).
  std::vector<ReceivedMessage> ReceiveN(SimpleConsumer& c, const std::string& topic, size_t n) {
    std::vector<ReceivedMessage> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      auto got = c.Receive(topic, Options(static_cast<int>(n - out.size()), 2000));
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) break;
      for (ReceivedMessage& m : *got) out.push_back(std::move(m));
    }
    return out;
  }

  // The NORMAL topic "orders" with one message, received (leased for 60 s) into *first.
  void LeaseOne(SimpleConsumer& consumer, std::vector<ReceivedMessage>* first) {
    CreateTopic("orders", proto::NORMAL);
    Send("orders", "only");
    *first = ReceiveN(consumer, "orders", 1);
    ASSERT_EQ(first->size(), 1u);
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
  std::unique_ptr<client::AdminClient> admin_;
  std::unique_ptr<client::Producer> producer_;
};

TEST_F(AckWithReceiveTest, EachHandleGetsTheResultAnAckWouldGiveAndTheNextBatchComes) {
  CreateTopic("orders", proto::NORMAL);
  for (int i = 0; i < 3; ++i) Send("orders", "m" + std::to_string(i));
  SimpleConsumer consumer(broker_->Options(), "billing");
  std::vector<ReceivedMessage> first = ReceiveN(consumer, "orders", 3);
  ASSERT_EQ(first.size(), 3u);
  Send("orders", "m3");

  std::vector<absl::Status> acked;
  auto next = consumer.AckAndReceive(
      {first[0].receipt_handle, first[1].receipt_handle, "zz-not-a-handle",
       first[0].receipt_handle},
      "orders", Options(16, 2000), &acked);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(acked.size(), 4u);
  EXPECT_TRUE(acked[0].ok()) << acked[0];
  EXPECT_TRUE(acked[1].ok()) << acked[1];
  EXPECT_EQ(acked[2].code(), absl::StatusCode::kInvalidArgument) << acked[2];
  // Repeated in the batch: OK once, as in an AckRequest.
  EXPECT_EQ(acked[3].code(), absl::StatusCode::kFailedPrecondition) << acked[3];
  ASSERT_EQ(next->size(), 1u);  // m3; m2 is still leased
  EXPECT_EQ((*next)[0].body, "m3");

  // The acks stood: acking again is refused; the handle not acked still works.
  EXPECT_EQ(consumer.Ack(first[1].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(consumer.Ack(first[2].receipt_handle).ok());
  // Past every lease and the first backoff, only m3 (never acked) comes back: m0 and m1 were
  // acked by the receive. The broker clock moves in steps, each followed by a short poll.
  std::vector<ReceivedMessage> again;
  for (int step = 0; step < 40 && again.empty(); ++step) {
    ASSERT_TRUE(admin_->AdvanceClock(5'000).ok());
    auto got = consumer.Receive("orders", Options(16, 300));
    ASSERT_TRUE(got.ok()) << got.status();
    again = std::move(*got);
  }
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].body, "m3");
  EXPECT_EQ(again[0].delivery_attempt, 2);
  auto none = consumer.Receive("orders", Options(16, 300));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

// Nothing ready: the receive waits out its long poll on a worker and is answered from there; the
// acks were applied once, before the wait (a second application would answer kFailedPrecondition).
TEST_F(AckWithReceiveTest, AcksAreAppliedOnceWhenTheReceiveWaitsOutItsLongPoll) {
  SimpleConsumer consumer(broker_->Options(), "billing");
  std::vector<ReceivedMessage> first;
  ASSERT_NO_FATAL_FAILURE(LeaseOne(consumer, &first));
  std::vector<absl::Status> acked;
  const auto t0 = std::chrono::steady_clock::now();
  auto next = consumer.AckAndReceive({first[0].receipt_handle}, "orders", Options(16, 400), &acked);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->empty());
  EXPECT_GE(waited, std::chrono::milliseconds(300));  // it did wait (the broker's clock is manual,
                                                      // the long poll is real time)
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_TRUE(acked[0].ok()) << acked[0];
  EXPECT_EQ(consumer.Ack(first[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
}

// A namespaced connection (its requests go through the proto path, not the encoded receive):
// the same results, and the acks are those of the namespace's group.
TEST_F(AckWithReceiveTest, ANamespacedConsumerGetsTheSameResults) {
  client::ClientOptions o = broker_->Options();
  o.namespace_ = "team_a";
  client::AdminClient admin(o);
  proto::TopicConfig t;
  t.set_name("orders");
  t.set_type(proto::NORMAL);
  t.set_queues(1);
  ASSERT_TRUE(admin.CreateTopic(t).ok());
  client::Producer producer(o);
  for (const char* body : {"a", "b"}) {
    OutgoingMessage m;
    m.topic = "orders";
    m.body = body;
    ASSERT_TRUE(producer.Send(m).ok());
  }
  SimpleConsumer consumer(o, "billing");
  std::vector<ReceivedMessage> first;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (first.empty() && std::chrono::steady_clock::now() < deadline) {
    auto got = consumer.Receive("orders", Options(1, 2000));
    ASSERT_TRUE(got.ok()) << got.status();
    first = std::move(*got);
  }
  ASSERT_EQ(first.size(), 1u);
  std::vector<absl::Status> acked;
  auto next = consumer.AckAndReceive({first[0].receipt_handle}, "orders", Options(16, 2000),
                                     &acked);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_TRUE(acked[0].ok()) << acked[0];
  ASSERT_EQ(next->size(), 1u);
  EXPECT_NE((*next)[0].body, first[0].body);
  EXPECT_EQ((*next)[0].topic, "orders");  // the client's name, not the stored one
  EXPECT_EQ(consumer.Ack(first[0].receipt_handle).code(), absl::StatusCode::kFailedPrecondition);
}

// A receive refused by its own validation answers its error and acks nothing.
TEST_F(AckWithReceiveTest, ARefusedReceiveAcksNothing) {
  SimpleConsumer consumer(broker_->Options(), "billing");
  std::vector<ReceivedMessage> first;
  ASSERT_NO_FATAL_FAILURE(LeaseOne(consumer, &first));
  std::vector<absl::Status> acked;
  auto missing = consumer.AckAndReceive({first[0].receipt_handle}, "no-such-topic",
                                        Options(16, 0), &acked);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  auto too_many = consumer.AckAndReceive({first[0].receipt_handle}, "orders", Options(5000, 0),
                                         &acked);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument) << too_many.status();
  EXPECT_TRUE(consumer.Ack(first[0].receipt_handle).ok());  // still leased, not acked
}

// FIFO: the group's next message is blocked behind its leased head; acking the head in the
// receive frees it for that same receive.
TEST_F(AckWithReceiveTest, InAFifoTopicTheNextMessageOfTheAckedGroupComesInTheSameAnswer) {
  CreateTopic("ff", proto::FIFO);
  Send("ff", "g1-a", "g1");
  Send("ff", "g1-b", "g1");
  SimpleConsumer consumer(broker_->Options(), "billing");
  std::vector<ReceivedMessage> head = ReceiveN(consumer, "ff", 1);
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(head[0].body, "g1-a");
  auto blocked = consumer.Receive("ff", Options(16, 0));
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  EXPECT_TRUE(blocked->empty());  // g1-b waits for g1-a's ack

  std::vector<absl::Status> acked;
  auto next = consumer.AckAndReceive({head[0].receipt_handle}, "ff", Options(16, 0), &acked);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_TRUE(acked[0].ok()) << acked[0];
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ((*next)[0].body, "g1-b");
}

}  // namespace
}  // namespace tokimq
