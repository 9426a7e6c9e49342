// SQL92 property filters end to end on the native API: the real broker binary, the C++ client's
// ReceiveOptions::sql_filter (proto ReceiveRequest.filter_type / filter_expression).
#include <gtest/gtest.h>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::OutgoingMessage;
using client::ReceiveOptions;
using client::SimpleConsumer;
using testing::BrokerProcess;

class SqlFilterIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(dir_.Join("data"),
                                              std::vector<std::string>{"--manual-clock"});
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    ASSERT_TRUE(testing::CreateTopic(*broker_, "orders", proto::NORMAL, 1).ok());
  }
  void Send(const std::string& body, std::map<std::string, std::string> props,
            const std::string& tag = "") {
    client::Producer producer(broker_->Options());
    OutgoingMessage m;
    m.topic = "orders";
    m.body = body;
    m.tag = tag;
    m.properties = std::move(props);
    auto r = producer.Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  static std::vector<std::string> Bodies(const std::vector<client::ReceivedMessage>& got) {
    std::vector<std::string> out;
    for (const auto& m : got) out.push_back(m.body);
    return out;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

TEST_F(SqlFilterIntegrationTest, ReceiveTakesOnlyMatchingMessages) {
  Send("eu-250", {{"region", "eu"}, {"amount", "250"}});
  Send("eu-5", {{"region", "eu"}, {"amount", "5"}});
  Send("us-900", {{"region", "us"}, {"amount", "900"}});
  Send("none", {});
  Send("eu-vip", {{"region", "eu"}, {"amount", "150"}}, "vip");

  SimpleConsumer consumer(broker_->Options(), "billing");
  ReceiveOptions o;
  o.long_poll_ms = 2000;
  o.sql_filter = "region IN ('eu', 'apac') AND amount BETWEEN 100 AND 1000";
  auto got = consumer.Receive("orders", o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Bodies(*got), (std::vector<std::string>{"eu-250", "eu-vip"}));

  // Another group, the tag visible as TAGS, and NOT / IS NULL.
  SimpleConsumer other(broker_->Options(), "audit");
  o.sql_filter = "TAGS IS NULL AND NOT (region = 'eu')";
  got = other.Receive("orders", o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Bodies(*got), (std::vector<std::string>{"us-900"}));
}

TEST_F(SqlFilterIntegrationTest, BadExpressionIsRefusedWithItsPosition) {
  SimpleConsumer consumer(broker_->Options(), "billing");
  ReceiveOptions o;
  o.long_poll_ms = 0;
  o.sql_filter = "amount > 'abc'";
  auto got = consumer.Receive("orders", o);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(),
            "sql filter: only numbers can be compared with >, >=, <, <= or BETWEEN at byte 7");
}

}  // namespace
}  // namespace tokimq
