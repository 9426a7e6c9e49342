// Offset-based consumption end to end on the native API (docs/protocol.md "Offset-based
// consumption"): pull by queue and offset, committed offsets per group and queue (durable
// across a crash), query offset by policy and time.
#include <gtest/gtest.h>

#include "broker_process.h"
#include "client/admin.h"
#include "client/connection.h"
#include "client/producer.h"
#include "test_util.h"

namespace tokimq {
namespace {

using client::ConnectionHolder;
using testing::BrokerProcess;

class PullIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(dir_.Join("data"),
                                              std::vector<std::string>{"--manual-clock"});
    ASSERT_TRUE(broker_->Start()) << "broker did not start; see " << dir_.Join("data.log");
    ASSERT_TRUE(testing::CreateTopic(*broker_, "orders", proto::NORMAL, 2).ok());
    conn_ = std::make_unique<ConnectionHolder>(broker_->Options());
  }
  // Sends `body` to queue 0 (all messages with one key land in one queue).
  void Send(const std::string& body, std::map<std::string, std::string> props = {}) {
    client::Producer producer(broker_->Options());
    client::OutgoingMessage m;
    m.topic = "orders";
    m.body = body;
    m.properties = std::move(props);
    m.key = "k";
    auto r = producer.Send(m);
    ASSERT_TRUE(r.ok()) << r.status();
    queue_ = r->queue_id;
  }
  // The response of a request expected to succeed.
  proto::Response Call(proto::Request req) {
    auto r = conn_->Call(std::move(req));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : proto::Response{};
  }
  // The status of a request (the client turns an error response into a failed call).
  absl::Status StatusOf(proto::Request req) { return conn_->Call(std::move(req)).status(); }
  proto::Request PullRequest(int64_t offset, int max, const std::string& sql = "") {
    proto::Request req;
    proto::PullRequest* p = req.mutable_pull();
    p->set_group("puller");
    p->set_topic("orders");
    p->set_queue_id(queue_);
    p->set_offset(offset);
    p->set_max_messages(max);
    if (!sql.empty()) {
      p->set_filter_type(proto::FILTER_SQL92);
      p->set_filter_expression(sql);
    }
    return req;
  }
  proto::Response Pull(int64_t offset, int max, const std::string& sql = "") {
    return Call(PullRequest(offset, max, sql));
  }
  static std::vector<std::string> Bodies(const proto::PullResponse& r) {
    std::vector<std::string> out;
    for (const auto& m : r.messages()) out.push_back(m.body());
    return out;
  }
  proto::Request OffsetRequest(const std::string& group) {
    proto::Request req;
    req.mutable_get_offset()->set_group(group);
    req.mutable_get_offset()->set_topic("orders");
    req.mutable_get_offset()->set_queue_id(queue_);
    return req;
  }
  proto::Response Query(proto::QueryOffsetRequest::Policy policy, int64_t ts = 0) {
    proto::Request req;
    req.mutable_query_offset()->set_topic("orders");
    req.mutable_query_offset()->set_queue_id(queue_);
    req.mutable_query_offset()->set_policy(policy);
    req.mutable_query_offset()->set_timestamp_ms(ts);
    return Call(std::move(req));
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
  std::unique_ptr<ConnectionHolder> conn_;
  int32_t queue_ = 0;
};

TEST_F(PullIntegrationTest, PullReadsFromAnOffsetWithoutLeasesAndAgain) {
  for (int i = 0; i < 5; ++i) Send("m" + std::to_string(i), {{"n", std::to_string(i)}});
  proto::Response r = Pull(1, 3);
  EXPECT_EQ(Bodies(r.pull()), (std::vector<std::string>{"m1", "m2", "m3"}));
  EXPECT_EQ(r.pull().next_offset(), 4);
  EXPECT_EQ(r.pull().min_offset(), 0);
  EXPECT_EQ(r.pull().max_offset(), 5);
  EXPECT_FALSE(r.pull().offset_illegal());
  EXPECT_EQ(r.pull().messages(0).queue_offset(), 1);
  EXPECT_EQ(r.pull().messages(0).properties().at("n"), "1");
  EXPECT_TRUE(r.pull().messages(0).receipt_handle().empty());
  // No lease: the same offset reads the same messages again.
  EXPECT_EQ(Bodies(Pull(1, 3).pull()), (std::vector<std::string>{"m1", "m2", "m3"}));
  // At the end: nothing, next offset unchanged.
  r = Pull(5, 3);
  EXPECT_TRUE(r.pull().messages().empty());
  EXPECT_EQ(r.pull().next_offset(), 5);
  // Beyond the end: illegal, the nearest valid offset is the end.
  r = Pull(9, 3);
  EXPECT_TRUE(r.pull().offset_illegal());
  EXPECT_EQ(r.pull().next_offset(), 5);
  // A SQL92 filter skips, and the skipped messages count as read.
  r = Pull(0, 2, "n >= 3");
  EXPECT_EQ(Bodies(r.pull()), (std::vector<std::string>{"m3", "m4"}));
  EXPECT_EQ(r.pull().next_offset(), 5);
  absl::Status bad = StatusOf(PullRequest(0, 2, "n > 'x'"));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "sql filter: only numbers can be compared with >, >=, <, <= or BETWEEN at byte 2");
}

TEST_F(PullIntegrationTest, CommittedOffsetIsPerGroupAndSurvivesACrash) {
  Send("m0");
  absl::Status none = StatusOf(OffsetRequest("puller"));
  EXPECT_EQ(none.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(none.message(), "group puller has no committed offset for orders/" +
                                std::to_string(queue_));
  proto::Request commit;
  proto::UpdateOffsetRequest* u = commit.mutable_update_offset();
  u->set_group("puller");
  u->set_topic("orders");
  u->set_queue_id(queue_);
  u->set_offset(7);
  ASSERT_TRUE(StatusOf(commit).ok());
  u->set_offset(3);  // may go back: the client owns its position
  ASSERT_TRUE(StatusOf(commit).ok());
  EXPECT_EQ(StatusOf(OffsetRequest("other")).code(), absl::StatusCode::kNotFound);
  broker_->Kill();
  ASSERT_TRUE(broker_->Start());
  conn_ = std::make_unique<ConnectionHolder>(broker_->Options());
  EXPECT_EQ(Call(OffsetRequest("puller")).offset().offset(), 3);
  // Bad requests: negative offset, queue out of range, unknown topic.
  u->set_offset(-1);
  EXPECT_EQ(StatusOf(commit).code(), absl::StatusCode::kInvalidArgument);
  u->set_offset(1);
  u->set_queue_id(2);
  EXPECT_EQ(StatusOf(commit).code(), absl::StatusCode::kInvalidArgument);
  u->set_topic("nope");
  EXPECT_EQ(StatusOf(commit).code(), absl::StatusCode::kNotFound);
}

TEST_F(PullIntegrationTest, QueryOffsetByPolicyAndTime) {
  client::AdminClient admin(broker_->Options());
  Send("m0");
  Send("m1");
  auto now = admin.AdvanceClock(60'000);
  ASSERT_TRUE(now.ok()) << now.status();
  const int64_t t = *now;
  Send("m2");
  EXPECT_EQ(Query(proto::QueryOffsetRequest::BEGINNING).offset().offset(), 0);
  EXPECT_EQ(Query(proto::QueryOffsetRequest::END).offset().offset(), 3);
  EXPECT_EQ(Query(proto::QueryOffsetRequest::TIMESTAMP, t).offset().offset(), 2);
  EXPECT_EQ(Query(proto::QueryOffsetRequest::TIMESTAMP, 0).offset().offset(), 0);
  EXPECT_EQ(Query(proto::QueryOffsetRequest::TIMESTAMP, t + 1).offset().offset(), 3);
}

}  // namespace
}  // namespace tokimq
