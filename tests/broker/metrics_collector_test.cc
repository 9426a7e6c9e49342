// MetricsFromStats (broker/src/http/metrics_collector.h): a Stats answer becomes the documented
// families with the same values; the lateness histogram's buckets fold into the `le` bounds;
// system topics get no series and the topic/group bounds cut and count the rest.
#include "http/metrics_collector.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "prometheus/text_serializer.h"

namespace tokimq::http {
namespace {

using prometheus::MetricFamily;

const MetricFamily* Find(const std::vector<MetricFamily>& fams, const std::string& name) {
  for (const MetricFamily& f : fams) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// label value of `label` -> value of the counter or gauge.
std::map<std::string, double> ByLabel(const MetricFamily& f, const std::string& label) {
  std::map<std::string, double> out;
  for (const auto& m : f.metric) {
    std::string key;
    for (const auto& l : m.label) {
      if (l.name == label) key = l.value;
    }
    out[key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
  }
  return out;
}

TEST(MetricsCollectorTest, LatenessBucketsFoldIntoTheLeBounds) {
  proto::StatsResponse s;
  auto* tm = s.mutable_timer();
  for (auto [upper_ms, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {1, 2}, {50, 1}, {67, 1}, {70'000, 1}, {400'000, 1}}) {
    auto* b = tm->add_lateness_buckets();
    b->set_upper_ms(upper_ms);
    b->set_count(count);
  }
  tm->set_lateness_count(7);
  tm->set_lateness_sum_ms(470'120);
  const auto fams = MetricsFromStats(s);
  const MetricFamily* h = Find(fams, "tokimq_timer_release_lateness_seconds");
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(h->metric.size(), 1u);
  const auto& hist = h->metric[0].histogram;
  EXPECT_EQ(hist.sample_count, 7u);
  EXPECT_DOUBLE_EQ(hist.sample_sum, 470.12);
  std::map<double, uint64_t> cumulative;
  for (const auto& b : hist.bucket) cumulative[b.upper_bound] = b.cumulative_count;
  EXPECT_EQ(cumulative.at(0.001), 3u);  // 0 ms and 1 ms
  EXPECT_EQ(cumulative.at(0.02), 3u);
  EXPECT_EQ(cumulative.at(0.05), 4u);   // 50 ms: exact bound
  EXPECT_EQ(cumulative.at(0.1), 5u);    // (63, 67] ms
  EXPECT_EQ(cumulative.at(60), 5u);
  EXPECT_EQ(cumulative.at(300), 6u);    // 70 s
  EXPECT_EQ(cumulative.at(std::numeric_limits<double>::infinity()), 7u);  // 400 s
  EXPECT_EQ(hist.bucket.size(), std::size(kLatenessBucketsSeconds) + 1);
}

TEST(MetricsCollectorTest, TopicsGroupsAndTimerCarryTheStatsValues) {
  proto::StatsResponse s;
  auto* t = s.add_topics();
  t->set_name("orders");
  t->set_depth(4);
  t->set_messages_sent(9);
  s.add_topics()->set_name("%DLQ%g1");  // system topics get no series
  s.add_topics()->set_name("tokimq_sys_timer");
  auto* g = s.add_groups();
  g->set_group("g1");
  g->set_in_flight(2);
  g->set_acked(5);
  g->set_lease_expired(1);
  g->set_oldest_unacked_age_ms(1'500);
  g->set_dlq_total(3);
  g->set_dlq_depth(2);
  auto* gt = g->add_topic_stats();
  gt->set_topic("orders");
  gt->set_received(8);
  gt->set_lag(1);
  for (int i = 0; i < 9; ++i) s.mutable_timer()->add_pending_by_bucket(10 + i);
  s.mutable_timer()->set_recalled(4);
  s.set_commitlog_max_offset(1000);
  s.set_commitlog_min_offset(200);
  s.set_disk_free_bytes(12345);
  s.mutable_transactions()->set_commits(6);
  s.set_broker_version("1.2.3");

  const auto fams = MetricsFromStats(s);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_messages_sent_total"), "topic"),
            (std::map<std::string, double>{{"orders", 9}}));
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_topic_depth_messages"), "topic").at("orders"), 4);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_messages_acked_total"), "group").at("g1"), 5);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_lease_expired_total"), "group").at("g1"), 1);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_consumer_inflight_messages"), "group").at("g1"), 2);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_consumer_oldest_unacked_age_seconds"), "group").at("g1"),
            1.5);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_dlq_messages_total"), "group").at("g1"), 3);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_messages_received_total"), "topic").at("orders"), 8);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_consumer_lag_messages"), "topic").at("orders"), 1);
  const auto pending = ByLabel(*Find(fams, "tokimq_timer_pending_messages"), "remaining");
  EXPECT_EQ(pending, (std::map<std::string, double>{{"5s", 10}, {"1m", 11}, {"5m", 12},
                                                     {"15m", 13}, {"1h", 14}, {"4h", 15},
                                                     {"8h", 16}, {"1d", 17}, {"more", 18}}));
  EXPECT_EQ(Find(fams, "tokimq_timer_recalled_total")->metric[0].counter.value, 4);
  EXPECT_EQ(Find(fams, "tokimq_commitlog_bytes")->metric[0].gauge.value, 800);
  EXPECT_EQ(Find(fams, "tokimq_disk_free_bytes")->metric[0].gauge.value, 12345);
  EXPECT_EQ(Find(fams, "tokimq_transaction_commits_total")->metric[0].counter.value, 6);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_build_info"), "version").at("1.2.3"), 1);

  // The text format: label values quoted, counters typed.
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, fams);
  EXPECT_NE(text.str().find("# TYPE tokimq_messages_sent_total counter\n"), std::string::npos);
  EXPECT_NE(text.str().find("tokimq_messages_sent_total{topic=\"orders\"} 9\n"),
            std::string::npos)
      << text.str();
}

TEST(MetricsCollectorTest, TopicAndGroupSeriesAreBounded) {
  proto::StatsResponse s;
  for (int i = 0; i < kMaxLabeledTopics + 3; ++i) s.add_topics()->set_name("t" + std::to_string(i));
  for (int i = 0; i < kMaxLabeledGroups + 2; ++i) s.add_groups()->set_group("g" + std::to_string(i));
  const auto fams = MetricsFromStats(s);
  EXPECT_EQ(Find(fams, "tokimq_messages_sent_total")->metric.size(),
            static_cast<size_t>(kMaxLabeledTopics));
  EXPECT_EQ(Find(fams, "tokimq_messages_acked_total")->metric.size(),
            static_cast<size_t>(kMaxLabeledGroups));
  const auto omitted = ByLabel(*Find(fams, "tokimq_metrics_omitted"), "kind");
  EXPECT_EQ(omitted.at("topic"), 3);
  EXPECT_EQ(omitted.at("group"), 2);
}

TEST(MetricsCollectorTest, ReplicationRoleTermAndEachFollowersLag) {
  proto::StatsResponse s;
  auto* r = s.mutable_replication();
  r->set_role("leader");
  r->set_term(4711);
  r->set_replication("sync");
  auto* f = r->add_followers();
  f->set_follower("1");
  f->set_lag_bytes(2048);
  f->set_lag_ms(250);
  f->set_last_pull_ms(3);
  f = r->add_followers();
  f->set_follower("2");
  const auto fams = MetricsFromStats(s);
  ASSERT_NE(Find(fams, "tokimq_replication_leader"), nullptr);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_replication_leader"), "replication").at("sync"), 1);
  EXPECT_EQ(Find(fams, "tokimq_replication_term")->metric[0].gauge.value, 4711);
  EXPECT_EQ(ByLabel(*Find(fams, "tokimq_replication_lag_bytes"), "follower"),
            (std::map<std::string, double>{{"1", 2048}, {"2", 0}}));
  EXPECT_DOUBLE_EQ(ByLabel(*Find(fams, "tokimq_replication_lag_seconds"), "follower").at("1"), 0.25);
  EXPECT_DOUBLE_EQ(
      ByLabel(*Find(fams, "tokimq_replication_last_pull_age_seconds"), "follower").at("1"), 0.003);
  r->set_role("follower");
  EXPECT_EQ(ByLabel(*Find(MetricsFromStats(s), "tokimq_replication_leader"), "replication").at("sync"), 0);
}

}  // namespace
}  // namespace tokimq::http
