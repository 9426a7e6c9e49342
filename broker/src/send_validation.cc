#include "send_validation.h"

#include <algorithm>

#include "common/message_limits.h"
#include "fmt/format.h"
#include "proto/duration.h"
#include "timerstore/timer_store.h"
#include "transaction/transaction_send.h"

namespace tokimq::broker {
namespace {

// When `e` is to be delivered: now, now + delay, or its deliver_at (never before now).
absl::Status DeliverTimeOf(const proto::SendEntry& e, const TopicConfig& topic, int64_t now,
                           int64_t* deliver_ms) {
  *deliver_ms = now;
  if (e.when_case() == proto::SendEntry::kDelayMs) {
    if (e.delay_ms() < 0) return absl::InvalidArgumentError("delay must be >= 0");
    if (e.delay_ms() > kMaxMaxDelayMs) {
      return absl::InvalidArgumentError(fmt::format(
          "delay {} exceeds the max delay {} of topic '{}'", wire::FormatDuration(e.delay_ms()),
          wire::FormatDuration(topic.max_delay_ms), topic.name));
    }
    *deliver_ms = now + e.delay_ms();
  } else if (e.when_case() == proto::SendEntry::kDeliverAtMs) {
    *deliver_ms = std::max(e.deliver_at_ms(), now);
  }
  if (*deliver_ms - now > topic.max_delay_ms) {
    return absl::InvalidArgumentError(fmt::format(
        "delay {} exceeds the max delay {} of topic '{}'", wire::FormatDuration(*deliver_ms - now),
        wire::FormatDuration(topic.max_delay_ms), topic.name));
  }
  return absl::OkStatus();
}

// FIFO topics need a message group (explicit, else the key) within its limits; other topics
// take none.
absl::Status CheckMessageGroup(const proto::SendEntry& e, const TopicConfig& topic) {
  const std::string& group = MessageGroupOf(e);
  if (topic.type != TopicType::kFifo) {
    if (e.message_group().empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        fmt::format("topic '{}' is {}: message groups need a FIFO topic", topic.name,
                    TopicTypeName(topic.type)));
  }
  const char* what = e.message_group().empty() ? "message group (the key)" : "message group";
  if (group.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "topic '{}' is FIFO: a message needs a message group (or a key)", topic.name));
  }
  if (group.size() > kMaxMessageGroupBytes) {
    return absl::InvalidArgumentError(fmt::format("{} of {} bytes exceeds {} bytes", what,
                                                  group.size(), kMaxMessageGroupBytes));
  }
  for (unsigned char c : group) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(fmt::format("{} contains a control character", what));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::string& MessageGroupOf(const proto::SendEntry& e) {
  return e.message_group().empty() ? e.key() : e.message_group();
}

absl::Status ValidateSendEntry(const proto::SendEntry& e, const TopicConfig& topic,
                               uint32_t max_message_size, int64_t now_ms, int64_t* deliver_ms) {
  if (e.body().size() > max_message_size) {
    return absl::InvalidArgumentError(
        fmt::format("body of {} bytes exceeds the max message size of {} bytes", e.body().size(),
                    max_message_size));
  }
  if (absl::Status s = DeliverTimeOf(e, topic, now_ms, deliver_ms); !s.ok()) return s;
  if (e.properties().count(prop::kMessageGroup) > 0) {
    return absl::InvalidArgumentError(fmt::format(
        "property {} is reserved: set the message group instead", prop::kMessageGroup));
  }
  // The timer store acts on these: TIMER_DELETE_OF on a delayed message would make it a recall
  // marker (it cancels the pending message at that offset and itself is never delivered);
  // TIMER_SRC_OFFSET on any message would make crash recovery take the pending message at that
  // offset as delivered.
  // TX_HALF_OFFSET would make transaction recovery take the half at that offset as committed.
  for (const char* reserved : {kTimerDeleteOf, kTimerSourceOffset, prop::kTxHalfOffset}) {
    if (e.properties().count(reserved) > 0) {
      return absl::InvalidArgumentError(
          fmt::format("property {} is reserved for the {}", reserved,
                      reserved == prop::kTxHalfOffset ? "transactions" : "timer store"));
    }
  }
  // Key, tag and properties: one limit each and one on their total (common/message_limits.h;
  // a receive answer repeats the key and tag, so an unbounded key could exceed the frame limit).
  if (absl::Status hs = CheckMessageHeaders(e.key(), e.tag(), e.properties()); !hs.ok()) {
    return hs;
  }
  if (absl::Status ts = CheckTransactional(e, topic); !ts.ok()) return ts;
  return CheckMessageGroup(e, topic);
}

}  // namespace tokimq::broker
