#include "console/stats_json.h"

namespace tokimq::broker::console {

using nlohmann::json;

const char* DiskStateName(proto::DiskState s) {
  switch (s) {
    case proto::DISK_ABOVE_WATERMARK:
      return "above_watermark";
    case proto::DISK_FULL:
      return "full";
    default:
      return "ok";
  }
}

const char* TopicTypeJsonName(proto::TopicType t) {
  switch (t) {
    case proto::DELAY:
      return "delay";
    case proto::FIFO:
      return "fifo";
    case proto::TRANSACTION:
      return "transaction";
    default:
      return "normal";
  }
}

json OverviewJson(const proto::StatsResponse& st, const OverviewExtras& extras) {
  int64_t dlq_total = 0, in_flight = 0;
  for (const proto::GroupStats& g : st.groups()) {
    dlq_total += g.dlq_depth();
    in_flight += g.in_flight();
  }
  const proto::TimerStats& tm = st.timer();
  return json{
      {"version", extras.version},
      {"now_ms", st.now_ms()},
      {"uptime_ms", extras.uptime_ms},
      {"manual_clock", extras.manual_clock},
      {"topic_count", st.topic_count()},
      {"group_count", st.group_count()},
      {"in_flight", in_flight},
      {"dlq_total", dlq_total},
      {"poison_depth", st.poison_depth()},
      {"rates", {{"sent_per_s", extras.sent_per_s},
                 {"released_per_s", extras.released_per_s}}},
      {"timer", {{"pending", tm.pending()},
                 {"delivered", tm.delivered()},
                 {"recalled", tm.recalled()},
                 {"lateness_p99_ms", tm.lateness_p99_ms()}}},
      {"disk", {{"state", DiskStateName(st.disk_state())},
                {"free_bytes", st.disk_free_bytes()},
                {"total_bytes", st.disk_total_bytes()},
                {"watermark_free_bytes", st.disk_watermark_free_bytes()},
                {"sends_refused", st.sends_refused()}}},
      {"commitlog", {{"min_offset", st.commitlog_min_offset()},
                     {"max_offset", st.commitlog_max_offset()},
                     {"flushed_offset", st.commitlog_flushed_offset()}}},
  };
}

json TopicsJson(const proto::StatsResponse& st, const std::map<std::string, double>& rates) {
  json topics = json::array();
  for (const proto::TopicStats& t : st.topics()) {
    auto it = rates.find(t.name());
    topics.push_back({{"name", t.name()},
                      {"type", TopicTypeJsonName(t.type())},
                      {"depth", t.depth()},
                      {"sent", t.messages_sent()},
                      {"rate_per_s", it == rates.end() ? 0.0 : it->second}});
  }
  return json{{"topic_count", st.topic_count()}, {"topics", std::move(topics)}};
}

json GroupsJson(const proto::StatsResponse& st) {
  json groups = json::array();
  for (const proto::GroupStats& g : st.groups()) {
    int64_t lag = 0;
    json per_topic = json::array();
    for (const proto::GroupTopicStats& t : g.topic_stats()) {
      lag += t.lag();
      per_topic.push_back({{"topic", t.topic()}, {"lag", t.lag()}, {"received", t.received()}});
    }
    groups.push_back({{"group", g.group()},
                      {"topics", json(std::vector<std::string>(g.topics().begin(), g.topics().end()))},
                      {"lag", lag},
                      {"in_flight", g.in_flight()},
                      {"oldest_unacked_age_ms", g.oldest_unacked_age_ms()},
                      {"dlq_depth", g.dlq_depth()},
                      {"parked", g.parked()},
                      {"acked", g.acked()},
                      {"lease_expired", g.lease_expired()},
                      {"topic_stats", std::move(per_topic)}});
  }
  return json{{"group_count", st.group_count()}, {"groups", std::move(groups)}};
}

namespace {

json DueJson(const DueCounts& d) {
  return json{{"bucket_ms", d.bucket_ms}, {"counts", d.counts}, {"later", d.later}};
}

}  // namespace

json TimerJson(const proto::StatsResponse& st, const DueCounts& minutes, const DueCounts& hours) {
  const proto::TimerStats& tm = st.timer();
  static const char* kLabels[] = {"<=5s", "<=1m", "<=5m", "<=15m", "<=1h",
                                  "<=4h", "<=8h", "<=1d", ">1d"};
  json by_delay = json::array();
  for (int i = 0; i < tm.pending_by_bucket_size() && i < 9; ++i) {
    by_delay.push_back({{"label", kLabels[i]}, {"count", tm.pending_by_bucket(i)}});
  }
  json lateness_buckets = json::array();
  for (const proto::LatenessBucket& b : tm.lateness_buckets()) {
    lateness_buckets.push_back({{"upper_ms", b.upper_ms()}, {"count", b.count()}});
  }
  return json{
      {"now_ms", minutes.now_ms},
      {"pending", tm.pending()},
      {"delivered", tm.delivered()},
      {"rolled", tm.rolled()},
      {"recalled", tm.recalled()},
      {"enqueue_lag", tm.enqueue_lag()},
      {"dequeue_lag_ms", tm.dequeue_lag_ms()},
      {"pending_by_remaining", std::move(by_delay)},
      {"per_minute", DueJson(minutes)},
      {"per_hour", DueJson(hours)},
      {"lateness", {{"p50_ms", tm.lateness_p50_ms()},
                    {"p99_ms", tm.lateness_p99_ms()},
                    {"max_ms", tm.lateness_max_ms()},
                    {"count", tm.lateness_count()},
                    {"buckets", std::move(lateness_buckets)}}},
  };
}

}  // namespace tokimq::broker::console
