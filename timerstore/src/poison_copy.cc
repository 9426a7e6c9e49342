#include "poison_copy.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "timerstore/timer_store.h"

namespace tokimq {
namespace {

void AddUnitFacts(const ScheduledUnit& su, int64_t now, Message* m) {
  m->properties[prop::kDeliverMs] = std::to_string(su.unit.deliver_ms);
  m->properties[prop::kTimerEnqueueMs] = std::to_string(su.unit.write_ms);
  m->properties[prop::kTimerDequeueMs] = std::to_string(now);
  m->properties[prop::kTimerUnitPos] = std::to_string(su.pos.value());
  m->properties[kTimerSourceOffset] = std::to_string(su.unit.physical_offset.value());
}

void Park(Message* m, std::string_view reason) {
  m->properties[kPoisonReason] = std::string(reason);
  m->properties[kPoisonSource] = "timer";
  m->topic = kPoisonTopic;
  m->queue_id = 0;
  m->queue_offset = QueueOffset::kNone();
  m->physical_offset = PhysicalOffset::kNone();
  m->store_ms = 0;
}

}  // namespace

Message PoisonFromCopy(Message copy, std::string_view reason) {
  if (!copy.encoded_properties.empty()) {
    copy.properties.clear();
    // Written by DeliveredCopy from a record that decoded: well formed.
    (void)record::DecodeProperties(copy.encoded_properties, &copy.properties);
    copy.encoded_properties.clear();
  }
  copy.properties[kPoisonTopicProp] = copy.topic;
  copy.properties[kPoisonQueueId] = std::to_string(copy.queue_id);
  Park(&copy, reason);
  return copy;
}

Message PoisonFromRecord(const record::RecordView& rec, const ScheduledUnit& su, int64_t now,
                         std::string_view reason) {
  if (rec.topic != kTimerTopic) {
    return PoisonStub(su, now,
                      absl::StrCat(std::string(reason), " (the unit points at a record of topic '",
                                   QuoteName(rec.topic), "')"));
  }
  Message m;
  (void)record::DecodeProperties(rec.properties, &m.properties);  // the view decoded
  m.born_ms = rec.born_ms;
  m.flags = rec.flags;
  m.body.assign(rec.body.data(), rec.body.size());
  if (auto it = m.properties.find(prop::kRealTopic); it != m.properties.end()) {
    m.properties[kPoisonTopicProp] = it->second;
  }
  if (auto it = m.properties.find(prop::kRealQueueId); it != m.properties.end()) {
    m.properties[kPoisonQueueId] = it->second;
  }
  AddUnitFacts(su, now, &m);
  Park(&m, reason);
  return m;
}

Message PoisonStub(const ScheduledUnit& su, int64_t now, std::string_view reason) {
  Message m;
  m.born_ms = now;
  AddUnitFacts(su, now, &m);
  Park(&m, reason);
  return m;
}

Message WithoutBody(Message parked, std::string_view why) {
  parked.body.clear();
  parked.properties[kPoisonReason] =
      absl::StrCat(parked.properties[kPoisonReason], "; body dropped: ", std::string(why));
  return parked;
}

}  // namespace tokimq
