// The console's read-only JSON views (/api/overview, /api/topics, /api/groups, /api/timer),
// each built from one Stats answer (proto::StatsResponse, the figures `tokimq stats` prints)
// plus what the caller measured; pure functions, so tests check them against a known answer.
// Field by field: docs/console.md "API".
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nlohmann/json.hpp"
#include "proto/tokimq.pb.h"
#include "timerstore/timer_store.h"

namespace tokimq::broker::console {

struct OverviewExtras {
  std::string version;   // "tokimq X.Y.Z"
  int64_t uptime_ms = 0;
  bool manual_clock = false;
  double sent_per_s = 0;      // messages sent to user topics (all topics' send rates)
  double released_per_s = 0;  // timer releases (delivered counter)
};

nlohmann::json OverviewJson(const proto::StatsResponse& st, const OverviewExtras& extras);
// rates: topic name -> messages sent per second (absent: 0).
nlohmann::json TopicsJson(const proto::StatsResponse& st, const std::map<std::string, double>& rates);
nlohmann::json GroupsJson(const proto::StatsResponse& st);
// minutes / hours: TimerStore::PendingByDueTime(60 s, 60) and (1 h, 168).
nlohmann::json TimerJson(const proto::StatsResponse& st, const DueCounts& minutes,
                         const DueCounts& hours);

// The disk state's name in JSON and on the page: "ok", "above_watermark", "full" (as
// `tokimq stats` prints it).
const char* DiskStateName(proto::DiskState s);
const char* TopicTypeJsonName(proto::TopicType t);  // "normal", "delay", "fifo", "transaction"

}  // namespace tokimq::broker::console
