// RewriteForSchedule (see schedule_rewrite.h).
#include "schedule_rewrite.h"

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "commitlog/record.h"
#include "common/property_keys.h"
#include "prop_keys.h"
#include "timerstore/timer_store.h"

namespace tokimq {
namespace {

// Decimal digits of v in buf (at least 20 bytes); the view of them. As std::to_string.
std::string_view Decimal(int64_t v, char* buf, size_t size) {
  auto [end, ec] = std::to_chars(buf, buf + size, v);
  (void)ec;  // 20 bytes hold every int64
  return std::string_view(buf, static_cast<size_t>(end - buf));
}

bool RewriteMap(Message* msg, int64_t deliver_ms, int64_t now) {
  msg->properties.insert_or_assign(timer_keys::DeliverMs(), std::to_string(deliver_ms));
  if (deliver_ms <= now) return true;
  msg->properties.erase(prop::kTimerDeleteOf);
  msg->properties.insert_or_assign(timer_keys::RealTopic(), std::move(msg->topic));
  msg->properties.insert_or_assign(timer_keys::RealQueueId(), std::to_string(msg->queue_id));
  msg->topic = kTimerTopic;
  msg->queue_id = 0;
  return false;
}

}  // namespace

bool RewriteForSchedule(Message* msg, int64_t deliver_ms, int64_t now) {
  if (msg->encoded_properties.empty()) return RewriteMap(msg, deliver_ms, now);
  char deliver_buf[24];
  char qid_buf[24];
  const std::string_view deliver = Decimal(deliver_ms, deliver_buf, sizeof(deliver_buf));
  const bool due = deliver_ms <= now;
  // Keys strictly ascending, as EditProperties needs: REAL_QID < REAL_TOPIC < TIMER_DELETE_OF <
  // TIMER_DELIVER_MS.
  static_assert(std::string_view(prop::kRealQueueId) < std::string_view(prop::kRealTopic));
  static_assert(std::string_view(prop::kRealTopic) < std::string_view(prop::kTimerDeleteOf));
  static_assert(std::string_view(prop::kTimerDeleteOf) < std::string_view(prop::kDeliverMs));
  record::PropertyEdit edits[4];
  size_t n = 0;
  if (!due) {
    edits[n++] = {prop::kRealQueueId, Decimal(msg->queue_id, qid_buf, sizeof(qid_buf))};
    edits[n++] = {prop::kRealTopic, std::string_view(msg->topic)};
    edits[n++] = {prop::kTimerDeleteOf, std::nullopt};
  }
  edits[n++] = {prop::kDeliverMs, deliver};
  std::string edited;
  if (!record::EditProperties(msg->encoded_properties, std::span(edits, n), &edited)) {
    // Not in our encoder's order: through the map, which gives the same result for any input.
    (void)record::DecodeProperties(msg->encoded_properties, &msg->properties);
    msg->encoded_properties.clear();
    return RewriteMap(msg, deliver_ms, now);
  }
  msg->encoded_properties = std::move(edited);
  if (due) return true;
  msg->topic = kTimerTopic;
  msg->queue_id = 0;
  return false;
}

}  // namespace tokimq
