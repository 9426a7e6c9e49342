// Enqueue services: timer-topic ConsumeQueue -> TimerLog + TimerWheel.
#include <algorithm>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/logging.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "prop_keys.h"
#include "timer_store_impl.h"

namespace tokimq {
namespace {

// The fields enqueue needs from a timer-topic record's properties, from one walk over them
// (the first of duplicate keys counts, as RecordView::FindProperty).
struct TimerFields {
  bool has_deliver = false;  // TIMER_DELIVER_MS present and a valid integer
  bool is_delete = false;    // TIMER_DELETE_OF present and a valid integer
  int64_t deliver_ms = 0;
  int64_t delete_of = -1;
  uint32_t topic_hash = 0;  // crc32c of REAL_TOPIC, 0 when absent
  bool is_copy = false;     // TIMER_MOVED_FROM present (a retention copy)
};

TimerFields TimerFieldsOf(const record::RecordView& v) {
  TimerFields f;
  bool seen_deliver = false, seen_delete = false, seen_topic = false;
  Decoder pd(v.properties);
  std::string_view k, val;
  while (pd.GetLengthPrefixed(&k) && pd.GetLengthPrefixed(&val)) {
    if (!seen_deliver && k == prop::kDeliverMs) {
      seen_deliver = true;
      f.has_deliver = ParseInt64(val, &f.deliver_ms);
    } else if (!seen_delete && k == kTimerDeleteOf) {
      seen_delete = true;
      f.is_delete = ParseInt64(val, &f.delete_of);
    } else if (!seen_topic && k == prop::kRealTopic) {
      seen_topic = true;
      f.topic_hash = crc32c::Value(val.data(), val.size());
    } else if (k == kTimerMovedFrom) {
      f.is_copy = true;
    }
  }
  return f;
}

}  // namespace

absl::StatusOr<size_t> TimerStoreImpl::EnqueueGetStep() {
  QueueOffset from;
  size_t room;
  {
    std::lock_guard<std::mutex> l(mu_);
    room = kEnqueueQueueCap - std::min(kEnqueueQueueCap, enqueue_queue_.size());
    from = enqueue_read_offset_;
  }
  if (room == 0) return 0;  // back-pressure: enqueue put is behind
  const QueueOffset max = store_->MaxQueueOffset(kTimerTopic, 0);
  if (from >= max) return 0;
  // Only a few fields of each record are needed: visit record views instead of decoding
  // Messages (no per-message allocation besides the queue slot).
  std::vector<EnqueueItem> items;
  items.reserve(std::min<size_t>(room, 1024));
  TOKIMQ_RETURN_IF_ERROR(
      store_
          ->VisitQueue(kTimerTopic, 0, from, static_cast<int>(std::min<size_t>(room, 1024)),
                       [&items](const record::RecordView& v) {
                         const TimerFields f = TimerFieldsOf(v);
                         EnqueueItem it;
                         it.physical_offset = v.physical_offset;
                         it.queue_offset = v.queue_offset;
                         it.size = v.size;
                         it.has_deliver = f.has_deliver;
                         it.is_delete = f.is_delete;
                         it.deliver_ms = f.deliver_ms;
                         it.delete_of = PhysicalOffset(f.delete_of);
                         it.topic_hash = f.topic_hash;
                         it.is_copy = f.is_copy;
                         items.push_back(it);
                         return absl::OkStatus();
                       })
          .status());
  std::lock_guard<std::mutex> l(mu_);
  timer_max_queue_offset_ = std::max(timer_max_queue_offset_, max);
  if (items.empty()) {
    // Entries whose records were deleted by retention are skipped by VisitQueue.
    enqueue_read_offset_ = std::max(enqueue_read_offset_, max);
    return 0;
  }
  for (const EnqueueItem& it : items) {
    enqueue_read_offset_ = it.queue_offset + 1;
    enqueue_queue_.push_back(it);
  }
  return items.size();
}

absl::StatusOr<size_t> TimerStoreImpl::EnqueuePutStep() {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  while (!enqueue_queue_.empty() && n < 1024) {
    const EnqueueItem& m = enqueue_queue_.front();
    const int64_t deliver = m.deliver_ms;
    const PhysicalOffset target = m.delete_of;
    // Already in the TimerLog?
    const bool duplicate = m.physical_offset <= last_enqueued_physical_offset_;
    if (duplicate) {
      // Recovery re-reads from the checkpointed queue offset; the TimerLog tail has these.
    } else if (!m.is_delete && m.physical_offset < moves_.frontier) {
      // Below the move frontier: moved by retention (the mover commits only after every
      // record below it is in a durable TimerLog, so this is a re-read after a crash).
      last_enqueued_physical_offset_ = m.physical_offset;
    } else if (!m.has_deliver) {
      TOKIMQ_LOG_WARN("timerstore: timer-topic record at {} has no deliver time; skipped",
                      m.physical_offset);
    } else if (m.is_delete) {
      TimerUnit u;
      u.flags = kUnitDelete;
      u.write_ms = clock_->NowMs();
      u.deliver_ms = deliver;
      u.slot_tick = -1;
      u.physical_offset = m.physical_offset;
      u.ref = target.value();
      TOKIMQ_RETURN_IF_ERROR(timerlog_->Append(u).status());
      recalled_[target] = deliver;
      metrics_.pending.Sub(1);
      pending_by_delay_.Sub(TickOf(deliver));
      last_enqueued_physical_offset_ = m.physical_offset;
    } else {
      TimerUnit u;
      u.flags = m.is_copy ? kUnitMovedCopy : kUnitNormal;
      u.deliver_ms = deliver;
      u.physical_offset = m.physical_offset;
      u.msg_size = m.size;
      u.topic_hash = m.topic_hash;
      TOKIMQ_RETURN_IF_ERROR(LinkUnitLocked(u).status());
      if (!m.is_copy) {  // a copy's message was counted when first enqueued
        metrics_.pending.Add(1);
        pending_by_delay_.Add(TickOf(deliver));
      }
      pins_[PinBucketOf(m.physical_offset)]++;
      last_enqueued_physical_offset_ = m.physical_offset;
    }
    enqueue_offset_ = m.queue_offset + 1;
    enqueue_queue_.pop_front();
    ++n;
  }
  if (n > 0) {
    metrics_.enqueue_lag.Set(std::max<int64_t>(0, timer_max_queue_offset_ - enqueue_offset_));
  }
  return n;
}

}  // namespace tokimq
