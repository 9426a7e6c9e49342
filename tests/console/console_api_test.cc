// The console's JSON API through http::Router::Dispatch on an in-process broker (manual clock,
// temp dir, no server): every figure equals the broker's Stats answer or the stored messages;
// DLQ resend, lookup, recall and the admin check of the actions.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "broker/auth/auth_store.h"
#include "broker/broker.h"
#include "common/clock.h"
#include "console/console.h"
#include "nlohmann/json.hpp"
#include "proto/tokimq.pb.h"
#include "test_util.h"

namespace tokimq::broker::console {
namespace {

using nlohmann::json;

class ConsoleApiTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(false); }

  void Open(bool auth) {
    BrokerOptions o;
    o.data_dir = dir_.path();
    o.manual_clock = true;
    o.manual_clock_start_ms = kStartMs;
    o.timer_window_ms = 3'600'000;
    o.timer_thread_nice = 0;
    o.retention_interval_ms = 0;
    o.group_policies["g"].max_attempts = 1;  // a nack dead-letters at once
    o.auth = auth;
    if (auth) o.auth_init_user = "root:rootsecret";
    auto b = Broker::Open(o);
    ASSERT_TRUE(b.ok()) << b.status();
    broker_ = std::move(*b);
    router_ = std::make_unique<http::Router>();
    AddRoutes(*router_, *broker_, ConsoleOptions{&console_clock_});
  }

  proto::Response Call(const proto::Request& req) {
    proto::Response resp;
    broker_->Handle(req, &resp);
    EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
    return resp;
  }
  void CreateTopic(const std::string& name, proto::TopicType type, int queues) {
    proto::Request req;
    auto* t = req.mutable_create_topic()->mutable_topic();
    t->set_name(name);
    t->set_type(type);
    t->set_queues(queues);
    Call(req);
  }
  proto::SendResult Send(const std::string& topic, const std::string& body, const std::string& key,
                         int64_t delay_ms = 0) {
    proto::Request req;
    auto* e = req.mutable_send()->add_entries();
    e->set_topic(topic);
    e->set_body(body);
    e->set_key(key);
    e->set_tag("tg");
    (*e->mutable_properties())["color"] = "blue";
    if (delay_ms > 0) e->set_delay_ms(delay_ms);
    return Call(req).send().results(0);
  }
  std::vector<proto::ReceivedMessage> Receive(const std::string& group, const std::string& topic,
                                              int max) {
    proto::Request req;
    req.mutable_receive()->set_group(group);
    req.mutable_receive()->set_topic(topic);
    req.mutable_receive()->set_max_messages(max);
    proto::Response r = Call(req);
    return {r.receive().messages().begin(), r.receive().messages().end()};
  }
  void Nack(const std::string& group, const std::string& handle) {
    proto::Request req;
    req.mutable_nack()->set_group(group);
    req.mutable_nack()->set_receipt_handle(handle);
    Call(req);
  }
  proto::StatsResponse Stats() {
    proto::Request req;
    req.mutable_stats();
    return Call(req).stats();
  }
  http::Response Dispatch(const std::string& method, const std::string& path,
                          std::map<std::string, std::string> query = {}, std::string body = "",
                          std::string authorization = "") {
    http::Request req{method, path, std::move(query), std::move(body), std::move(authorization)};
    return router_->Dispatch(req);
  }
  json Get(const std::string& path, std::map<std::string, std::string> query = {}) {
    http::Response r = Dispatch("GET", path, std::move(query));
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    return json::parse(r.body);
  }

  // Topics "orders" (4 queues, 5 messages) and "other" (1 message); group "g" took 3 of
  // orders: one is in flight, two were nacked to %DLQ%g.
  void KnownTraffic() {
    CreateTopic("orders", proto::NORMAL, 4);
    CreateTopic("other", proto::DELAY, 1);
    for (int i = 0; i < 5; ++i) Send("orders", "order-" + std::to_string(i), "k" + std::to_string(i));
    Send("other", "x", "kx");
    std::vector<proto::ReceivedMessage> got = Receive("g", "orders", 3);
    ASSERT_EQ(got.size(), 3u);
    Nack("g", got[0].receipt_handle());
    Nack("g", got[1].receipt_handle());
    dead_ = {got[0], got[1]};
  }

  static constexpr int64_t kStartMs = 1'700'000'000'000;
  testing::TempDir dir_;
  ManualClock console_clock_{kStartMs};
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<http::Router> router_;
  std::vector<proto::ReceivedMessage> dead_;
};

TEST_F(ConsoleApiTest, TopicsGroupsAndOverviewEqualTheStatsAnswer) {
  KnownTraffic();
  const proto::StatsResponse st = Stats();
  json topics = Get("/api/topics");
  ASSERT_EQ(topics["topics"].size(), 2u);
  EXPECT_EQ(topics["topic_count"], 2);
  for (const json& t : topics["topics"]) {
    const auto& s = *std::find_if(st.topics().begin(), st.topics().end(),
                                  [&](const proto::TopicStats& x) { return x.name() == t["name"]; });
    EXPECT_EQ(t["depth"].get<int64_t>(), s.depth()) << t["name"];
  }
  EXPECT_EQ(topics["topics"][0]["name"], "orders");
  EXPECT_EQ(topics["topics"][0]["depth"], 5);
  EXPECT_EQ(topics["topics"][0]["type"], "normal");
  EXPECT_EQ(topics["topics"][0]["sent"], 5);
  EXPECT_EQ(topics["topics"][1]["type"], "delay");

  json groups = Get("/api/groups");
  ASSERT_EQ(groups["groups"].size(), 1u);
  EXPECT_EQ(groups["groups"][0]["group"], "g");
  EXPECT_EQ(groups["groups"][0]["in_flight"], 1);
  EXPECT_EQ(groups["groups"][0]["dlq_depth"], 2);
  EXPECT_EQ(groups["groups"][0]["in_flight"].get<int64_t>(), st.groups(0).in_flight());
  EXPECT_EQ(groups["groups"][0]["dlq_depth"].get<int64_t>(), st.groups(0).dlq_depth());
  EXPECT_EQ(groups["groups"][0]["topics"], json::array({"orders"}));
  // Lag and received as Stats counts them (over the queues the group has received from).
  ASSERT_EQ(st.groups(0).topic_stats_size(), 1);
  EXPECT_EQ(groups["groups"][0]["lag"].get<int64_t>(), st.groups(0).topic_stats(0).lag());
  EXPECT_EQ(groups["groups"][0]["topic_stats"][0]["lag"].get<int64_t>(),
            st.groups(0).topic_stats(0).lag());
  EXPECT_EQ(groups["groups"][0]["topic_stats"][0]["received"], 3);
  EXPECT_EQ(groups["groups"][0]["oldest_unacked_age_ms"].get<int64_t>(),
            st.groups(0).oldest_unacked_age_ms());

  console_clock_.AdvanceMs(90'000);
  json o = Get("/api/overview");
  EXPECT_EQ(o["version"].get<std::string>().rfind("tokimq ", 0), 0u);
  EXPECT_EQ(o["uptime_ms"], 90'000);
  EXPECT_EQ(o["manual_clock"], true);
  EXPECT_EQ(o["dlq_total"], 2);
  EXPECT_EQ(o["in_flight"], 1);
  EXPECT_EQ(o["topic_count"], 2);
  EXPECT_EQ(o["group_count"], 1);
  EXPECT_EQ(o["now_ms"], kStartMs);
  EXPECT_EQ(o["disk"]["total_bytes"].get<uint64_t>(), st.disk_total_bytes());
  EXPECT_EQ(o["disk"]["state"], "ok");
  EXPECT_EQ(o["commitlog"]["max_offset"].get<int64_t>(), Stats().commitlog_max_offset());
}

TEST_F(ConsoleApiTest, SendRatesCountSendsOverTheConsoleClock) {
  CreateTopic("orders", proto::NORMAL, 2);
  Get("/api/topics");  // first sample
  for (int i = 0; i < 20; ++i) Send("orders", "m", "k" + std::to_string(i));
  console_clock_.AdvanceMs(4'000);
  json topics = Get("/api/topics");
  EXPECT_DOUBLE_EQ(topics["topics"][0]["rate_per_s"].get<double>(), 5.0);  // 20 in 4 s
  json o = Get("/api/overview");
  EXPECT_DOUBLE_EQ(o["rates"]["sent_per_s"].get<double>(), 5.0);
}

TEST_F(ConsoleApiTest, TimerViewHasAnHourOfMinutesAndAWeekOfHours) {
  json t = Get("/api/timer");
  EXPECT_EQ(t["per_minute"]["bucket_ms"], 60'000);
  EXPECT_EQ(t["per_minute"]["counts"].size(), 60u);
  EXPECT_EQ(t["per_hour"]["bucket_ms"], 3'600'000);
  EXPECT_EQ(t["per_hour"]["counts"].size(), 168u);
  EXPECT_EQ(t["pending_by_remaining"].size(), 9u);
  EXPECT_EQ(t["pending"], 0);
  EXPECT_EQ(t["now_ms"], kStartMs);
}

TEST_F(ConsoleApiTest, DlqListsTheDeadLetteredMessagesWithTheirProperties) {
  KnownTraffic();
  json d = Get("/api/dlq", {{"group", "g"}});
  EXPECT_EQ(d["topic"], "%DLQ%g");
  EXPECT_EQ(d["min_offset"], 0);
  EXPECT_EQ(d["max_offset"], 2);
  ASSERT_EQ(d["messages"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const json& m = d["messages"][i];
    EXPECT_EQ(m["id"], dead_[i].message_id());
    EXPECT_EQ(m["body_preview"], dead_[i].body());
    EXPECT_EQ(m["key"], dead_[i].key());
    EXPECT_EQ(m["tag"], "tg");
    EXPECT_EQ(m["properties"]["color"], "blue");
    EXPECT_EQ(m["properties"]["ORIGIN_TOPIC"], "orders");
    EXPECT_EQ(m["queue_offset"], i);
  }
  json page = Get("/api/dlq", {{"group", "g"}, {"from", "1"}, {"limit", "5"}});
  ASSERT_EQ(page["messages"].size(), 1u);
  EXPECT_EQ(page["messages"][0]["id"], dead_[1].message_id());
  EXPECT_EQ(Dispatch("GET", "/api/dlq", {{"group", "bad group!"}}).status, 400);
  EXPECT_EQ(Dispatch("GET", "/api/dlq", {{"group", "g"}, {"limit", "0"}}).status, 400);
  EXPECT_EQ(Dispatch("GET", "/api/dlq", {{"group", "g"}, {"limit", "abc"}}).status, 400);
  EXPECT_EQ(Dispatch("GET", "/api/dlq", {{"group", "g"}, {"from", "99999999999999999999"}}).status,
            400);
}

TEST_F(ConsoleApiTest, ResendPutsTheDlqMessageBackIntoItsTopic) {
  KnownTraffic();
  http::Response r = Dispatch("POST", "/api/dlq/resend", {}, R"({"group":"g","offset":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["topic"], "orders");
  EXPECT_NE(j["message_id"], dead_[1].message_id());  // a new message
  // Another group reads orders from the start: the 5 sent and the resent copy.
  std::vector<proto::ReceivedMessage> all = Receive("h", "orders", 16);
  ASSERT_EQ(all.size(), 6u);
  int copies = 0;
  for (const proto::ReceivedMessage& m : all) {
    if (m.message_id() != j["message_id"]) continue;
    ++copies;
    EXPECT_EQ(m.body(), dead_[1].body());
    EXPECT_EQ(m.key(), dead_[1].key());
    EXPECT_EQ(m.tag(), "tg");
    EXPECT_EQ(m.properties().at("color"), "blue");
    EXPECT_FALSE(m.properties().contains("ORIGIN_TOPIC"));
    EXPECT_FALSE(m.properties().contains("DELIVERY_ATTEMPT"));
  }
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(Dispatch("POST", "/api/dlq/resend", {}, R"({"group":"g","offset":7})").status, 404);
  EXPECT_EQ(Dispatch("POST", "/api/dlq/resend", {}, R"({"group":"g"})").status, 400);
  EXPECT_EQ(Dispatch("POST", "/api/dlq/resend", {}, "not json").status, 400);
  EXPECT_EQ(Dispatch("GET", "/api/dlq/resend").status, 405);
}

TEST_F(ConsoleApiTest, LookupFindsByIdAndByKeyAndShowsScheduledMessagesWithTheirRecallHandle) {
  KnownTraffic();
  json by_id = Get("/api/message", {{"id", dead_[0].message_id()}});
  // In its topic and in the DLQ (same id).
  ASSERT_EQ(by_id["messages"].size(), 2u);
  EXPECT_EQ(by_id["messages"][0]["topic"], "orders");
  EXPECT_EQ(by_id["messages"][1]["topic"], "%DLQ%g");
  json by_key = Get("/api/message", {{"key", "k3"}});
  ASSERT_EQ(by_key["messages"].size(), 1u);
  EXPECT_EQ(by_key["messages"][0]["body_preview"], "order-3");

  proto::SendResult later = Send("other", "wake me", "sleepy", 3'600'000);
  json sched = Get("/api/message", {{"key", "sleepy"}});
  ASSERT_EQ(sched["messages"].size(), 1u);
  EXPECT_EQ(sched["messages"][0]["scheduled"], true);
  EXPECT_EQ(sched["messages"][0]["topic"], "other");
  EXPECT_EQ(sched["messages"][0]["id"], later.message_id());
  EXPECT_EQ(sched["messages"][0]["deliver_ms"], later.deliver_at_ms());
  EXPECT_EQ(sched["messages"][0]["recall_handle"], later.recall_handle());
  EXPECT_EQ(Dispatch("GET", "/api/message").status, 400);
  EXPECT_TRUE(Get("/api/message", {{"id", "nope"}})["messages"].empty());
}

TEST_F(ConsoleApiTest, RecallByHandle) {
  CreateTopic("other", proto::DELAY, 1);
  proto::SendResult later = Send("other", "wake me", "sleepy", 3'600'000);
  const std::string body = json{{"handle", later.recall_handle()}}.dump();
  http::Response r = Dispatch("POST", "/api/recall", {}, body);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["recalled"], true);
  http::Response again = Dispatch("POST", "/api/recall", {}, body);
  EXPECT_EQ(again.status, 409) << again.body;  // already recalled
  EXPECT_EQ(Dispatch("POST", "/api/recall", {}, R"({"handle":"zz"})").status, 400);
}

TEST_F(ConsoleApiTest, WithAuthActionsNeedAnAdminUserAndReadsStayOpen) {
  broker_.reset();
  Open(/*auth=*/true);
  auth::User reader{"reader", "readersecret", auth::UserType::kNormal, true};
  ASSERT_TRUE(broker_->auth_store()->CreateUser(reader).ok());
  const std::string body = R"({"handle":"00"})";
  http::Response none = Dispatch("POST", "/api/recall", {}, body);
  EXPECT_EQ(none.status, 401);
  ASSERT_FALSE(none.headers.empty());
  EXPECT_EQ(none.headers.back().first, "WWW-Authenticate");
  EXPECT_EQ(Dispatch("POST", "/api/recall", {}, body, "Basic " + absl::Base64Escape("root:wrong!!")).status, 401);
  EXPECT_EQ(Dispatch("POST", "/api/recall", {}, body, "Basic " + absl::Base64Escape("reader:readersecret")).status, 403);
  // The admin passes the check; the handle itself is then refused.
  EXPECT_EQ(Dispatch("POST", "/api/recall", {}, body, "Basic " + absl::Base64Escape("root:rootsecret")).status, 400);
  EXPECT_EQ(Dispatch("GET", "/api/overview").status, 200);
}

TEST_F(ConsoleApiTest, ThePageAndItsFilesAreServedFromTheBinary) {
  http::Response page = Dispatch("GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<script src=\"/console.js\">"), std::string::npos);
  EXPECT_EQ(Dispatch("GET", "/index.html").body, page.body);
  http::Response js = Dispatch("GET", "/console.js");
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(js.body.find("/api/overview"), std::string::npos);
  EXPECT_EQ(Dispatch("GET", "/console.css").content_type, "text/css; charset=utf-8");
  EXPECT_EQ(Dispatch("GET", "/nope.js").status, 404);
}

}  // namespace
}  // namespace tokimq::broker::console
