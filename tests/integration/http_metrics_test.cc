// The broker's HTTP port end to end (issue 18): the real tokimq-broker on a free HTTP port
// answers /healthz, /readyz and /metrics; after known traffic on a manual clock the metrics
// carry exactly those numbers, `promtool check metrics` accepts the text, and the pending-by-
// remaining-delay figures move with the clock without a timer checkpoint.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "broker_process.h"
#include "client/admin.h"
#include "client/producer.h"
#include "client/simple_consumer.h"
#include "http_test_client.h"
#include "support/await.h"
#include "test_util.h"

namespace tokimq {
namespace {

using tokimq::testing::HttpGet;
using tokimq::testing::HttpReply;

// Sample lines of a text exposition, "name{labels}" -> value.
std::map<std::string, double> ParseSamples(const std::string& text) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

// Runs `promtool check metrics` on `text`; its exit status and output.
int Promtool(const std::string& text, const std::string& dir, std::string* output) {
  const std::string in = dir + "/scrape.txt";
  const std::string out = dir + "/promtool.out";
  std::ofstream(in) << text;
  const int rc = std::system(("promtool check metrics < " + in + " > " + out + " 2>&1").c_str());
  std::ifstream f(out);
  output->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return rc;
}

class HttpMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http_port_ = tokimq::testing::FreeTcpPort();
    std::ofstream(dir_.Join("broker.toml")) << "[group.g1]\nmax_attempts = 1\n";
    broker_ = std::make_unique<tokimq::testing::BrokerProcess>(
        dir_.Join("data"),
        std::vector<std::string>{"--manual-clock", "--http-port", std::to_string(http_port_), "-c",
                                 dir_.Join("broker.toml")});
    ASSERT_TRUE(broker_->Start());
  }

  std::map<std::string, double> Scrape() {
    const HttpReply r = HttpGet(http_port_, "/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.count("content-type") ? r.headers.at("content-type") : "",
              "text/plain; version=0.0.4; charset=utf-8");
    last_text_ = r.body;
    return ParseSamples(r.body);
  }

  tokimq::testing::TempDir dir_;
  uint16_t http_port_ = 0;
  std::unique_ptr<tokimq::testing::BrokerProcess> broker_;
  std::string last_text_;
};

TEST_F(HttpMetricsTest, HealthAndReadinessAnswerOnceTheBrokerServes) {
  const HttpReply health = HttpGet(http_port_, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  const HttpReply ready = HttpGet(http_port_, "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ready\n");
  EXPECT_EQ(HttpGet(http_port_, "/nothing-here").status, 404);
  // A malformed request gets 400; the port and the native port go on.
  {
    tokimq::testing::HttpConnection c(http_port_);
    ASSERT_TRUE(c.SendRaw("\x01\x02 garbage\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 400);
  }
  EXPECT_EQ(HttpGet(http_port_, "/healthz").status, 200);
  client::AdminClient admin(broker_->Options());
  EXPECT_TRUE(admin.Stats().ok());
}

TEST_F(HttpMetricsTest, MetricsCarryTheTrafficAndPromtoolAcceptsThem) {
  client::AdminClient admin(broker_->Options());
  proto::TopicConfig t;
  t.set_name("orders");
  t.set_type(proto::NORMAL);
  t.set_queues(1);
  ASSERT_TRUE(admin.CreateTopic(t).ok());
  client::Producer producer(broker_->Options());
  for (int i = 0; i < 7; ++i) {
    client::OutgoingMessage m;
    m.topic = "orders";
    m.body = "now" + std::to_string(i);
    ASSERT_TRUE(producer.Send(m).ok());
  }
  for (int64_t delay : {10 * 60'000LL, 2 * 3'600'000LL, 2 * 86'400'000LL}) {
    client::OutgoingMessage m;
    m.topic = "orders";
    m.body = "later";
    m.delay_ms = delay;
    ASSERT_TRUE(producer.Send(m).ok());
  }
  ASSERT_TRUE(tokimq::testing::AwaitTimerEnqueued(admin).ok());
  client::SimpleConsumer consumer(broker_->Options(), "g1");
  client::ReceiveOptions ro;
  ro.max_messages = 5;
  ro.long_poll_ms = 0;
  ro.invisible_ms = 30'000;
  auto got = consumer.Receive("orders", ro);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 5u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(consumer.Ack((*got)[i].receipt_handle).ok());

  auto m = Scrape();
  EXPECT_EQ(m["tokimq_messages_sent_total{topic=\"orders\"}"], 10);
  EXPECT_EQ(m["tokimq_messages_received_total{group=\"g1\",topic=\"orders\"}"], 5);
  EXPECT_EQ(m["tokimq_messages_acked_total{group=\"g1\"}"], 3);
  EXPECT_EQ(m["tokimq_consumer_inflight_messages{group=\"g1\"}"], 2);
  EXPECT_EQ(m["tokimq_consumer_lag_messages{group=\"g1\",topic=\"orders\"}"], 2);
  EXPECT_EQ(m["tokimq_consumer_oldest_unacked_age_seconds{group=\"g1\"}"], 0);  // no time passed
  EXPECT_EQ(m["tokimq_lease_expired_total{group=\"g1\"}"], 0);
  EXPECT_EQ(m["tokimq_timer_pending_messages{remaining=\"15m\"}"], 1);
  EXPECT_EQ(m["tokimq_timer_pending_messages{remaining=\"4h\"}"], 1);
  EXPECT_EQ(m["tokimq_timer_pending_messages{remaining=\"more\"}"], 1);
  EXPECT_EQ(m["tokimq_timer_pending_messages{remaining=\"5m\"}"], 0);
  EXPECT_EQ(m["tokimq_topic_depth_messages{topic=\"orders\"}"], 7);
  EXPECT_GT(m["tokimq_commitlog_bytes"], 0);
  EXPECT_GT(m["tokimq_disk_free_bytes"], 0);
  std::string promtool;
  EXPECT_EQ(Promtool(last_text_, dir_.path(), &promtool), 0) << promtool << "\n" << last_text_;

  // Six minutes later: the two leases expired into the DLQ (max_attempts = 1), the two
  // messages never received are 360 s old, and the 10-minute message has 4 minutes left: it
  // moved from the 15m to the 5m bucket, with no timer checkpoint in between.
  ASSERT_TRUE(admin.AdvanceClock(6 * 60'000).ok());
  // The expiry thread runs on its own: bounded wait. The counters move before it has ended
  // both leases: wait for the gauge too.
  EXPECT_TRUE(tokimq::testing::AwaitTrue(
      [&] {
        m = Scrape();
        return m["tokimq_lease_expired_total{group=\"g1\"}"] == 2 &&
               m["tokimq_dlq_messages_total{group=\"g1\"}"] == 2 &&
               m["tokimq_consumer_inflight_messages{group=\"g1\"}"] == 0;
      },
      std::chrono::seconds(10), "both leases expired into the DLQ", std::chrono::milliseconds(20)));
  EXPECT_EQ(m["tokimq_lease_expired_total{group=\"g1\"}"], 2);
  EXPECT_EQ(m["tokimq_dlq_messages_total{group=\"g1\"}"], 2);
  EXPECT_EQ(m["tokimq_consumer_inflight_messages{group=\"g1\"}"], 0);
  EXPECT_EQ(m["tokimq_consumer_oldest_unacked_age_seconds{group=\"g1\"}"], 360);
  EXPECT_EQ(m["tokimq_timer_pending_messages{remaining=\"15m\"}"], 0);
  EXPECT_EQ(m["tokimq_timer_pending_messages{remaining=\"5m\"}"], 1);

  // Five more: the 10-minute message is released one minute late (the clock jumped).
  ASSERT_TRUE(admin.AdvanceClock(5 * 60'000).ok());
  EXPECT_TRUE(tokimq::testing::AwaitTrue(
      [&] {
        m = Scrape();
        return m["tokimq_timer_release_lateness_seconds_count"] == 1;
      },
      std::chrono::seconds(10), "the release's lateness observed", std::chrono::milliseconds(20)));
  EXPECT_EQ(m["tokimq_timer_release_lateness_seconds_count"], 1);
  EXPECT_EQ(m["tokimq_timer_release_lateness_seconds_sum"], 60);
  EXPECT_EQ(m["tokimq_timer_release_lateness_seconds_bucket{le=\"+Inf\"}"], 1);
  EXPECT_EQ(m["tokimq_timer_release_lateness_seconds_bucket{le=\"30\"}"], 0);
  EXPECT_EQ(m["tokimq_timer_pending_messages{remaining=\"5m\"}"], 0);
  EXPECT_EQ(m["tokimq_timer_released_total"], 1);
  EXPECT_EQ(m["tokimq_messages_sent_total{topic=\"orders\"}"], 10);  // releases are not sends
  EXPECT_EQ(Promtool(last_text_, dir_.path(), &promtool), 0) << promtool;
}

}  // namespace
}  // namespace tokimq
