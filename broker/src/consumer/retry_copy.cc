// RetryCopyWriter and FirstStoreMs (consumer/retry_copy.h).
#include "consumer/retry_copy.h"

#include <string>

#include "commitlog/message_store.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/parse_int.h"
#include "timerstore/timer_store.h"

namespace tokimq::consumer {
namespace {

const std::string* FindProp(const Message& m, const char* name) {
  auto it = m.properties.find(name);
  return it == m.properties.end() ? nullptr : &it->second;
}

}  // namespace

int64_t FirstStoreMs(const Message& m) {
  int64_t first_store = m.store_ms;
  if (const std::string* v = FindProp(m, prop::kFirstStoreMs)) ParseInt64(*v, &first_store);
  return first_store;
}

int64_t FirstStoreMs(const record::RecordView& v) {
  int64_t first_store = v.store_ms;
  std::string_view s;
  if (v.FindProperty(prop::kFirstStoreMs, &s)) ParseInt64(s, &first_store);
  return first_store;
}

absl::Status RetryCopyWriter::Put(const QueueKey& k, Message copy, uint32_t attempt,
                                          bool to_dlq, int64_t deliver_ms) {
  const int64_t first_store = FirstStoreMs(copy);
  // Timer bookkeeping of the previous trip must not leak into the next one.
  for (const char* name : {prop::kRealTopic, prop::kRealQueueId, prop::kDeliverMs,
                           prop::kTimerEnqueueMs, prop::kTimerDequeueMs, prop::kTimerUnitPos,
                           prop::kTimerRollCount}) {
    copy.properties.erase(name);
  }
  copy.properties[prop::kFirstStoreMs] = std::to_string(first_store);
  copy.properties[prop::kOriginalTopic] = k.topic;
  copy.properties[prop::kDeliveryAttempt] = std::to_string(attempt);
  copy.queue_id = 0;
  copy.queue_offset = QueueOffset::kNone();
  copy.physical_offset = PhysicalOffset::kNone();
  copy.store_ms = 0;
  copy.topic = to_dlq ? DlqTopic(k.group) : RetryTopic(k.group);
  // A copy that can never be stored (a group named before the name rule has no valid retry or
  // DLQ topic; a copy the store refuses) is parked instead, so the lease ends and nothing
  // retries it forever Transient errors are returned: the lease stays, expiry
  // tries again.
  absl::Status s = ValidateDestination(copy.topic);
  if (s.ok()) {
    Message keep = copy;  // only a refusal needs it again
    s = to_dlq ? store_->Put(std::move(copy)).status()
               : timers_->Schedule(std::move(copy), deliver_ms).status();
    if (!absl::IsInvalidArgument(s)) return s;
    copy = std::move(keep);
  }
  return Park(std::move(copy), to_dlq ? "dlq" : "retry", s);
}

absl::Status RetryCopyWriter::Park(Message copy, const char* source,
                                           const absl::Status& why) {
  const std::string destination = copy.topic;
  copy.properties[kPoisonReason] = why.ToString();
  copy.properties[kPoisonTopicProp] = destination;
  copy.properties[kPoisonQueueId] = "0";
  copy.properties[kPoisonSource] = source;
  copy.topic = kPoisonTopic;
  Message keep = copy;
  absl::Status s = store_->Put(std::move(copy)).status();
  if (absl::IsInvalidArgument(s)) {  // too large with the poison properties: park it bodiless
    keep.body.clear();
    keep.properties[kPoisonReason] += "; body dropped: " + s.ToString();
    s = store_->Put(std::move(keep)).status();
  }
  const bool dropped = absl::IsInvalidArgument(s);
  if (!s.ok() && !dropped) return s;  // transient: the lease stays and is tried again
  uint64_t held = 0;
  if (poison_log_.Allow(clock_->NowMs(), &held)) {
    TOKIMQ_LOG_WARN("consumer: {} copy for '{}' {} {}: {} ({} similar lines suppressed)", source,
                    QuoteName(destination), dropped ? "dropped, not even parkable in" : "parked in",
                    kPoisonTopic, why.ToString(), held);
  }
  return absl::OkStatus();
}

}  // namespace tokimq::consumer
