// The broker's Prometheus metrics (issue 18, docs/metrics.md lists each one): computed at
// scrape time from one Stats answer (Broker::Handle with a StatsRequest), so the hot paths keep
// only the counters Stats already reads; nothing is stored between scrapes.
//
// Built on prometheus-cpp's data model (MetricFamily / ClientMetric) and its TextSerializer
// (text exposition format 0.0.4); its registry and civetweb server are not used: every value is
// read from the broker when scraped, which is what a custom Collectable does.
//
// Label cardinality: topics and groups are operator-created (no per-message labels); system
// topics are left out of the per-topic families; at most kMaxLabeledTopics topics and
// kMaxLabeledGroups groups get series (the first ones by name), the rest are counted in
// tokimq_metrics_omitted{kind}.
//
// Thread-safety: a pure function of the Broker's state; any thread (the HTTP server's).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/metric_family.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {
class Broker;
}

namespace tokimq::http {

inline constexpr int kMaxLabeledTopics = 2000;
inline constexpr int kMaxLabeledGroups = 2000;

// The lateness histogram's bucket bounds in seconds (Prometheus `le`), besides +Inf.
inline constexpr double kLatenessBucketsSeconds[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                                     0.1,   0.2,   0.5,   1,    2,    5,
                                                     10,    30,    60,    300};

// The families for one Stats answer (a pure function: tests feed it a StatsResponse).
std::vector<prometheus::MetricFamily> MetricsFromStats(const proto::StatsResponse& stats);

// Scrapes `broker` (one Stats request) and serializes its families in the text format.
// kInternal when the Stats request failed.
absl::StatusOr<std::string> RenderMetrics(broker::Broker& broker);

}  // namespace tokimq::http
