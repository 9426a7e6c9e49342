#include "delivered_copy.h"

#include <charconv>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "common/coding.h"
#include "common/parse_int.h"
#include "prop_keys.h"
#include "timerstore/timer_store.h"

namespace tokimq {
namespace {

bool GetInt(const record::RecordView& v, const std::string& key, int64_t* out) {
  std::string_view s;
  if (!v.FindProperty(key, &s)) return false;
  return ParseInt64(s, out);
}

// Everything of the copy but its properties and body; false when `rec` is not the record `su`
// points to.
bool CopyHeader(const record::RecordView& rec, const ScheduledUnit& su, Message* m) {
  int64_t deliver = 0, qid = 0;
  std::string_view real_topic;
  if (rec.topic != kTimerTopic || !GetInt(rec, timer_keys::DeliverMs(), &deliver) ||
      deliver != su.unit.deliver_ms || !rec.FindProperty(timer_keys::RealTopic(), &real_topic) ||
      !GetInt(rec, timer_keys::RealQueueId(), &qid)) {
    return false;
  }
  m->topic.assign(real_topic.data(), real_topic.size());
  m->queue_id = static_cast<int32_t>(qid);
  m->born_ms = rec.born_ms;
  m->store_ms = rec.store_ms;
  m->flags = rec.flags;
  return true;
}

// Decimal text of an integer, the digits std::to_string writes, without allocating.
class Decimal {
 public:
  template <typename T>
  explicit Decimal(T v)
      : size_(static_cast<size_t>(std::to_chars(buf_, buf_ + sizeof(buf_), v).ptr - buf_)) {}
  std::string_view view() const { return {buf_, size_}; }

 private:
  char buf_[24];  // "-9223372036854775808" is 20
  size_t size_;
};

// The keys DeliveredCopy edits, in the strictly ascending order record::EditProperties needs.
constexpr std::string_view kEditRealQueueId = prop::kRealQueueId;
constexpr std::string_view kEditRealTopic = prop::kRealTopic;
constexpr std::string_view kEditDequeueMs = prop::kTimerDequeueMs;
constexpr std::string_view kEditEnqueueMs = prop::kTimerEnqueueMs;
constexpr std::string_view kEditRollCount = prop::kTimerRollCount;
constexpr std::string_view kEditSourceOffset = kTimerSourceOffset;
constexpr std::string_view kEditUnitPos = prop::kTimerUnitPos;
static_assert(kEditRealQueueId < kEditRealTopic && kEditRealTopic < kEditDequeueMs &&
                  kEditDequeueMs < kEditEnqueueMs && kEditEnqueueMs < kEditRollCount &&
                  kEditRollCount < kEditSourceOffset && kEditSourceOffset < kEditUnitPos,
              "DeliveredCopy's edits must stay in ascending key order");

}  // namespace

std::optional<Message> DeliveredCopy(const record::RecordView& rec, const ScheduledUnit& su,
                                     int64_t now) {
  std::optional<Message> out(std::in_place);
  Message& m = *out;
  if (!CopyHeader(rec, su, &m)) return std::nullopt;
  const Decimal enqueue_ms(su.unit.write_ms), dequeue_ms(now), unit_pos(su.pos.value()),
      source_offset(su.unit.physical_offset.value()), roll_count(su.unit.roll_count);
  record::PropertyEdit edits[7];
  size_t n = 0;
  edits[n++] = {kEditRealQueueId, std::nullopt};
  edits[n++] = {kEditRealTopic, std::nullopt};
  edits[n++] = {kEditDequeueMs, dequeue_ms.view()};
  edits[n++] = {kEditEnqueueMs, enqueue_ms.view()};
  if (su.unit.roll_count > 0) edits[n++] = {kEditRollCount, roll_count.view()};
  edits[n++] = {kEditSourceOffset, source_offset.view()};
  edits[n++] = {kEditUnitPos, unit_pos.view()};
  if (!record::EditProperties(rec.properties, std::span(edits, n), &m.encoded_properties)) {
    return DeliveredCopyByMap(rec, su, now);  // keys not in our encoder's order
  }
  m.body.assign(rec.body.data(), rec.body.size());
  return out;
}

std::optional<Message> DeliveredCopyByMap(const record::RecordView& rec, const ScheduledUnit& su,
                                          int64_t now) {
  std::optional<Message> out(std::in_place);
  Message& m = *out;
  if (!CopyHeader(rec, su, &m)) return std::nullopt;
  const bool set_roll = su.unit.roll_count > 0;
  Decoder pd(rec.properties);
  std::string_view k, v;
  while (pd.GetLengthPrefixed(&k) && pd.GetLengthPrefixed(&v)) {
    if (k == timer_keys::RealTopic() || k == timer_keys::RealQueueId() ||
        k == timer_keys::EnqueueMs() || k == timer_keys::DequeueMs() ||
        k == timer_keys::UnitPos() || k == timer_keys::SourceOffset() ||
        (set_roll && k == timer_keys::RollCount())) {
      continue;  // replaced below
    }
    m.properties.emplace_hint(m.properties.end(), std::piecewise_construct,
                              std::forward_as_tuple(k.data(), k.size()),
                              std::forward_as_tuple(v.data(), v.size()));
  }
  m.properties.insert_or_assign(timer_keys::EnqueueMs(), std::to_string(su.unit.write_ms));
  m.properties.insert_or_assign(timer_keys::DequeueMs(), std::to_string(now));
  m.properties.insert_or_assign(timer_keys::UnitPos(), std::to_string(su.pos.value()));
  m.properties.insert_or_assign(timer_keys::SourceOffset(),
                                std::to_string(su.unit.physical_offset.value()));
  if (set_roll) {
    m.properties.insert_or_assign(timer_keys::RollCount(), std::to_string(su.unit.roll_count));
  }
  m.body.assign(rec.body.data(), rec.body.size());
  return out;
}

}  // namespace tokimq
