#include "http/metrics_collector.h"

#include <cmath>
#include <deque>
#include <iterator>
#include <limits>
#include <sstream>

#include "broker/broker.h"
#include "prometheus/text_serializer.h"

namespace tokimq::http {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// The remaining-delay buckets of TimerStats.pending_by_bucket (timerstore PendingByDelay):
// the upper bound of each, the last one unbounded.
constexpr const char* kRemainingLabels[] = {"5s", "1m", "5m", "15m", "1h", "4h", "8h", "1d",
                                            "more"};

bool IsSystemTopic(const std::string& topic) {
  return topic.empty() || topic[0] == '%' || topic.rfind("tokimq_sys_", 0) == 0;
}

class Families {
 public:
  MetricFamily& Add(std::string name, std::string help, MetricType type) {
    MetricFamily f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = type;
    families_.push_back(std::move(f));
    return families_.back();
  }
  // One sample of a counter or gauge family.
  static void Sample(MetricFamily& f, double value,
                     std::vector<ClientMetric::Label> labels = {}) {
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    f.metric.push_back(std::move(m));
  }
  void Single(std::string name, std::string help, MetricType type, double value) {
    Sample(Add(std::move(name), std::move(help), type), value);
  }
  std::vector<MetricFamily> Take() {
    return std::vector<MetricFamily>(std::make_move_iterator(families_.begin()),
                                     std::make_move_iterator(families_.end()));
  }

  int64_t omitted_topics = 0;
  int64_t omitted_groups = 0;

 private:
  std::deque<MetricFamily> families_;  // a deque: Add's references stay valid
};

void AddTimer(const proto::TimerStats& tm, Families* out) {
  MetricFamily& pending = out->Add(
      "tokimq_timer_pending_messages",
      "Scheduled messages not yet released, by remaining delay (upper bound of the bucket).",
      MetricType::Gauge);
  for (int i = 0; i < tm.pending_by_bucket_size() && i < 9; ++i) {
    Families::Sample(pending, static_cast<double>(tm.pending_by_bucket(i)),
                     {{"remaining", kRemainingLabels[i]}});
  }
  out->Single("tokimq_timer_released_total",
              "Scheduled messages put into their topic since the broker started.",
              MetricType::Counter, static_cast<double>(tm.delivered()));
  out->Single("tokimq_timer_recalled_total",
              "Scheduled messages recalled before their deliver time since the broker started.",
              MetricType::Counter, static_cast<double>(tm.recalled()));
  out->Single("tokimq_timer_enqueue_lag_messages",
              "Timer-topic messages not yet linked into the timer wheel.", MetricType::Gauge,
              static_cast<double>(tm.enqueue_lag()));
  out->Single("tokimq_timer_dequeue_lag_seconds",
              "Now minus the end of the oldest due tick whose messages are not all released.",
              MetricType::Gauge, static_cast<double>(tm.dequeue_lag_ms()) / 1000.0);
  out->Single("tokimq_timer_poison_parked_total",
              "Due messages the timer could not deliver, parked in tokimq_sys_poison.",
              MetricType::Counter, static_cast<double>(tm.poison_parked()));

  MetricFamily& lateness = out->Add(
      "tokimq_timer_release_lateness_seconds",
      "Put into the topic minus deliver time of each released message, since the broker started.",
      MetricType::Histogram);
  ClientMetric h;
  h.histogram.sample_count = static_cast<uint64_t>(tm.lateness_count());
  h.histogram.sample_sum = static_cast<double>(tm.lateness_sum_ms()) / 1000.0;
  // Each of the timer's log-linear buckets (upper_ms inclusive) goes into the first `le` at or
  // above its upper bound: exact below 64 ms, at most 6.25 % conservative above.
  std::vector<uint64_t> counts(std::size(kLatenessBucketsSeconds) + 1, 0);
  for (const proto::LatenessBucket& b : tm.lateness_buckets()) {
    size_t i = 0;
    while (i < std::size(kLatenessBucketsSeconds) &&
           static_cast<double>(b.upper_ms()) > kLatenessBucketsSeconds[i] * 1000.0 + 1e-9) {
      ++i;
    }
    counts[i] += static_cast<uint64_t>(b.count());
  }
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    ClientMetric::Bucket bucket;
    bucket.cumulative_count = cumulative;
    bucket.upper_bound = i < std::size(kLatenessBucketsSeconds)
                             ? kLatenessBucketsSeconds[i]
                             : std::numeric_limits<double>::infinity();
    h.histogram.bucket.push_back(bucket);
  }
  lateness.metric.push_back(std::move(h));
}

void AddStore(const proto::StatsResponse& s, Families* out) {
  out->Single("tokimq_commitlog_bytes",
              "Bytes of the CommitLog still stored (end offset minus first retained offset).",
              MetricType::Gauge,
              static_cast<double>(s.commitlog_max_offset() - s.commitlog_min_offset()));
  out->Single("tokimq_commitlog_max_offset_bytes",
              "End of the CommitLog (bytes ever appended, kept across restarts).",
              MetricType::Gauge, static_cast<double>(s.commitlog_max_offset()));
  out->Single("tokimq_disk_free_bytes",
              "Free bytes on the data directory's file system (cached statvfs).",
              MetricType::Gauge, static_cast<double>(s.disk_free_bytes()));
  out->Single("tokimq_disk_total_bytes", "Size of the data directory's file system.",
              MetricType::Gauge, static_cast<double>(s.disk_total_bytes()));
  out->Single("tokimq_disk_watermark_free_bytes",
              "Producer sends are refused while free bytes are below this.", MetricType::Gauge,
              static_cast<double>(s.disk_watermark_free_bytes()));
  out->Single("tokimq_sends_refused_total",
              "Producer sends refused by the disk watermark since the broker started.",
              MetricType::Counter, static_cast<double>(s.sends_refused()));
  out->Single("tokimq_poison_messages", "Records stored in tokimq_sys_poison.",
              MetricType::Gauge, static_cast<double>(s.poison_depth()));
}

void AddTransactions(const proto::TransactionStats& t, Families* out) {
  out->Single("tokimq_transaction_halves_pending",
              "Half messages neither committed nor rolled back.", MetricType::Gauge,
              static_cast<double>(t.halves_pending()));
  out->Single("tokimq_transaction_oldest_pending_age_seconds",
              "Age of the oldest pending half message (0 when none).", MetricType::Gauge,
              static_cast<double>(t.oldest_pending_age_ms()) / 1000.0);
  out->Single("tokimq_transaction_commits_total", "Transactions committed since start.",
              MetricType::Counter, static_cast<double>(t.commits()));
  out->Single("tokimq_transaction_rollbacks_total", "Transactions rolled back since start.",
              MetricType::Counter, static_cast<double>(t.rollbacks()));
  out->Single("tokimq_transaction_checks_sent_total",
              "Check-backs handed to a live producer since start.", MetricType::Counter,
              static_cast<double>(t.checks_sent()));
  out->Single("tokimq_transaction_moved_unresolved_total",
              "Half messages moved to tokimq_sys_trans_unresolved since start.",
              MetricType::Counter, static_cast<double>(t.moved_unresolved()));
}

void AddTopics(const proto::StatsResponse& s, Families* out) {
  MetricFamily& sent = out->Add("tokimq_messages_sent_total",
                                "Messages producers sent to the topic and the broker stored "
                                "(immediate, delayed, transactional), since the broker started.",
                                MetricType::Counter);
  MetricFamily& depth = out->Add("tokimq_topic_depth_messages",
                                 "Messages stored in the topic (sum over queues of max - min "
                                 "queue offset).",
                                 MetricType::Gauge);
  int labeled = 0;
  for (const proto::TopicStats& t : s.topics()) {
    if (IsSystemTopic(t.name())) continue;
    if (labeled == kMaxLabeledTopics) {
      out->omitted_topics++;
      continue;
    }
    ++labeled;
    Families::Sample(sent, static_cast<double>(t.messages_sent()), {{"topic", t.name()}});
    Families::Sample(depth, static_cast<double>(t.depth()), {{"topic", t.name()}});
  }
}

void AddGroups(const proto::StatsResponse& s, Families* out) {
  auto family = [&](const char* name, const char* help, MetricType type) -> MetricFamily& {
    return out->Add(name, help, type);
  };
  MetricFamily& received = family(
      "tokimq_messages_received_total",
      "Messages handed out to the group from the topic (redeliveries count), since start.",
      MetricType::Counter);
  MetricFamily& lag = family("tokimq_consumer_lag_messages",
                             "Messages stored in the topic's queues (and the group's retry "
                             "queue) not yet handed out to the group.",
                             MetricType::Gauge);
  MetricFamily& acked = family("tokimq_messages_acked_total",
                               "Deliveries the group acked since the broker started.",
                               MetricType::Counter);
  MetricFamily& expired = family("tokimq_lease_expired_total",
                                 "Leases of the group that ran out without an ack (nacks not "
                                 "counted) since the broker started.",
                                 MetricType::Counter);
  MetricFamily& inflight = family("tokimq_consumer_inflight_messages",
                                  "Messages of the group under a live lease.", MetricType::Gauge);
  MetricFamily& oldest = family("tokimq_consumer_oldest_unacked_age_seconds",
                                "Now minus the time the oldest message the group has not acked "
                                "became visible (leased or not yet received); 0 when none.",
                                MetricType::Gauge);
  MetricFamily& dlq = family("tokimq_dlq_messages_total",
                             "Messages ever moved to the group's dead-letter topic %DLQ%<group> "
                             "(its end offset; survives restarts).",
                             MetricType::Counter);
  MetricFamily& dlq_depth = family("tokimq_dlq_depth_messages",
                                   "Messages stored in the group's dead-letter topic.",
                                   MetricType::Gauge);
  int labeled = 0;
  for (const proto::GroupStats& g : s.groups()) {
    if (labeled == kMaxLabeledGroups) {
      out->omitted_groups++;
      continue;
    }
    ++labeled;
    const std::vector<ClientMetric::Label> group = {{"group", g.group()}};
    Families::Sample(acked, static_cast<double>(g.acked()), group);
    Families::Sample(expired, static_cast<double>(g.lease_expired()), group);
    Families::Sample(inflight, static_cast<double>(g.in_flight()), group);
    Families::Sample(oldest, static_cast<double>(g.oldest_unacked_age_ms()) / 1000.0, group);
    Families::Sample(dlq, static_cast<double>(g.dlq_total()), group);
    Families::Sample(dlq_depth, static_cast<double>(g.dlq_depth()), group);
    for (const proto::GroupTopicStats& t : g.topic_stats()) {
      const std::vector<ClientMetric::Label> labels = {{"group", g.group()},
                                                       {"topic", t.topic()}};
      Families::Sample(received, static_cast<double>(t.received()), labels);
      Families::Sample(lag, static_cast<double>(t.lag()), labels);
    }
  }
}

// Issue 20 item 6: role, term and each follower's lag as the leader measures it.
void AddReplication(const proto::GroupStatusResponse& r, Families* out) {
  MetricFamily& role = out->Add(
      "tokimq_replication_leader",
      "1 while this broker leads its broker group (writes accepted), else 0.", MetricType::Gauge);
  Families::Sample(role, r.role() == "leader" ? 1 : 0, {{"replication", r.replication()}});
  out->Single("tokimq_replication_term",
              "The newest term of its broker group this broker has seen (the etcd revision of "
              "the leader's winning put in cluster mode).",
              MetricType::Gauge, static_cast<double>(r.term()));
  MetricFamily& bytes = out->Add(
      "tokimq_replication_lag_bytes",
      "Leader only: CommitLog bytes a follower does not hold yet.", MetricType::Gauge);
  MetricFamily& secs = out->Add(
      "tokimq_replication_lag_seconds",
      "Leader only: age of the oldest CommitLog byte a follower does not hold yet (0: caught up).",
      MetricType::Gauge);
  MetricFamily& pull = out->Add(
      "tokimq_replication_last_pull_age_seconds",
      "Leader only: time since a follower's last pull reached this leader.", MetricType::Gauge);
  for (const proto::FollowerLag& f : r.followers()) {
    Families::Sample(bytes, static_cast<double>(f.lag_bytes()), {{"follower", f.follower()}});
    Families::Sample(secs, static_cast<double>(f.lag_ms()) / 1000.0, {{"follower", f.follower()}});
    Families::Sample(pull, static_cast<double>(f.last_pull_ms()) / 1000.0,
                     {{"follower", f.follower()}});
  }
}

void AddProcess(const proto::StatsResponse& s, const Families& counts, Families* out) {
  MetricFamily& info = out->Add("tokimq_build_info", "The broker's version (value always 1).",
                                MetricType::Gauge);
  Families::Sample(info, 1, {{"version", s.broker_version()}});
  out->Single("tokimq_start_time_seconds",
              "Broker clock when this process opened its stores, seconds since the epoch.",
              MetricType::Gauge, static_cast<double>(s.started_ms()) / 1000.0);
  MetricFamily& omitted = out->Add(
      "tokimq_metrics_omitted",
      "Topics or groups left out of the labeled families by the cardinality bound.",
      MetricType::Gauge);
  Families::Sample(omitted, static_cast<double>(counts.omitted_topics), {{"kind", "topic"}});
  Families::Sample(omitted, static_cast<double>(counts.omitted_groups), {{"kind", "group"}});
}

}  // namespace

std::vector<MetricFamily> MetricsFromStats(const proto::StatsResponse& stats) {
  Families out;  // the order of families is the order of docs/metrics.md
  AddTopics(stats, &out);
  AddGroups(stats, &out);
  AddTimer(stats.timer(), &out);
  AddStore(stats, &out);
  AddTransactions(stats.transactions(), &out);
  AddReplication(stats.replication(), &out);
  AddProcess(stats, out, &out);
  return out.Take();
}

absl::StatusOr<std::string> RenderMetrics(broker::Broker& broker) {
  proto::Request req;
  req.mutable_stats()->set_omit_queues(true);  // depth is still set; no per-queue offsets
  proto::Response resp;
  broker.Handle(req, &resp);
  if (resp.has_status() && resp.status().code() != 0) {
    return absl::InternalError("stats: " + resp.status().message());
  }
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, MetricsFromStats(resp.stats()));
  return text.str();
}

}  // namespace tokimq::http
