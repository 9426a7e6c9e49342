// Keys, tags and properties have one limit each and one on their total (common/message_limits.h),
// checked by the broker on every Send (here through a raw connection, so the C++ Producer's own
// check does not stand in for it) and by the Producer before sending (without them an
// 8.5 MiB key is stored, and its receive answer exceeds the 16 MiB frame limit forever).
#include <gtest/gtest.h>

#include <string>

#include "broker_process.h"
#include "client/admin.h"
#include "client/connection.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "common/message_limits.h"
#include "test_util.h"

namespace tokimq {
namespace {

using testing::BrokerProcess;
using testing::TempDir;

class MessageLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(dir_.Join("data"));
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    client::AdminClient admin(broker_->Options());
    proto::TopicConfig t;
    t.set_name("lim");
    t.set_type(proto::NORMAL);
    t.set_queues(1);
    ASSERT_TRUE(admin.CreateTopic(t).ok());
    auto conn = client::Connection::Open(broker_->Options());
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(*conn);
  }
  proto::SendEntry Entry() {
    proto::SendEntry e;
    e.set_topic("lim");
    e.set_body("x");
    return e;
  }
  // The broker's answer to a native Send of `e`, as a status.
  absl::Status RawSend(const proto::SendEntry& e) {
    proto::Request req;
    *req.mutable_send()->add_entries() = e;
    auto resp = conn_->Call(std::move(req), 30'000);
    if (!resp.ok()) return resp.status();
    if (resp->has_status() && resp->status().code() != 0) {
      return absl::Status(static_cast<absl::StatusCode>(resp->status().code()),
                          resp->status().message());
    }
    return absl::OkStatus();
  }
  int64_t Depth() {
    client::AdminClient admin(broker_->Options());
    auto st = admin.Stats();
    EXPECT_TRUE(st.ok());
    return st.ok() && st->topics_size() == 1 ? st->topics(0).depth() : -1;
  }

  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
  std::unique_ptr<client::Connection> conn_;
};

TEST_F(MessageLimitsTest, BrokerRefusesEachLimitWithAClearErrorAndStoresNothing) {
  proto::SendEntry e = Entry();
  e.set_key(std::string(8'912'896, 'k'));  // the 8.5 MiB key of the report
  absl::Status s = RawSend(e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "key of 8912896 bytes exceeds the limit of 16384 bytes");

  e = Entry();
  e.set_tag(std::string(100'000, 't'));
  s = RawSend(e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "tag of 100000 bytes exceeds the limit of 16384 bytes");

  e = Entry();
  for (int i = 0; i < 10'000; ++i) (*e.mutable_properties())["p" + std::to_string(i)] = "v";
  s = RawSend(e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "10000 properties exceed the limit of 128 per message");

  e = Entry();
  (*e.mutable_properties())[std::string(2'000, 'n')] = "v";
  EXPECT_EQ(RawSend(e).code(), absl::StatusCode::kInvalidArgument);
  e = Entry();
  (*e.mutable_properties())["v"] = std::string(20'000, 'v');
  EXPECT_EQ(RawSend(e).code(), absl::StatusCode::kInvalidArgument);
  e = Entry();
  e.set_key(std::string(kMaxKeyBytes, 'k'));
  e.set_tag(std::string(kMaxTagBytes, 't'));
  (*e.mutable_properties())["one"] = "more";
  s = RawSend(e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("together exceed the limit of 32768 bytes"), std::string::npos) << s;
  // Delayed sends are checked the same way (nothing reaches the timer).
  e = Entry();
  e.set_key(std::string(kMaxKeyBytes + 1, 'k'));
  e.set_delay_ms(60'000);
  EXPECT_EQ(RawSend(e).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Depth(), 0);
}

TEST_F(MessageLimitsTest, MessageAtEveryLimitIsStoredAndReceivedIntact) {
  proto::SendEntry e = Entry();
  e.set_key(std::string(kMaxKeyBytes - 100, 'k'));
  e.set_tag(std::string(100, 't'));
  for (size_t i = 0; i < kMaxProperties; ++i) {
    (*e.mutable_properties())["p" + std::to_string(i)] = std::string(100, 'v');
  }
  ASSERT_TRUE(RawSend(e).ok());
  EXPECT_EQ(Depth(), 1);
  client::SimpleConsumer consumer(broker_->Options(), "g");
  client::ReceiveOptions o;
  o.long_poll_ms = 2'000;
  auto got = consumer.Receive("lim", o);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().key, e.key());
  EXPECT_EQ(got->front().tag, e.tag());
  EXPECT_EQ(got->front().properties.at("p127"), std::string(100, 'v'));
}

TEST_F(MessageLimitsTest, ProducerRefusesBeforeSending) {
  client::Producer producer(broker_->Options());
  client::OutgoingMessage m;
  m.topic = "lim";
  m.body = "x";
  m.key = std::string(8'912'896, 'k');
  auto r = producer.Send(m);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "key of 8912896 bytes exceeds the limit of 16384 bytes");
  client::OutgoingMessage ok;
  ok.topic = "lim";
  ok.body = "y";
  auto batch = producer.SendBatch({ok, m});
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batch.status().message().rfind("message 1: key of", 0), 0u) << batch.status();
  EXPECT_EQ(Depth(), 0);
}

}  // namespace
}  // namespace tokimq
