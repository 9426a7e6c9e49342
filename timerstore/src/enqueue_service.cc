// Enqueue services: timer-topic ConsumeQueue -> TimerLog + TimerWheel.
#include <algorithm>
#include <charconv>

#include "common/crc32c.h"
#include "common/logging.h"
#include "common/status.h"
#include "prop_keys.h"
#include "timer_store_impl.h"

namespace tokimq {
namespace {

bool GetInt(const Message& m, const std::string& key, int64_t* v) {
  auto it = m.properties.find(key);
  if (it == m.properties.end()) return false;
  const std::string& s = it->second;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

absl::StatusOr<size_t> TimerStoreImpl::EnqueueGetStep() {
  int64_t from;
  size_t room;
  {
    std::lock_guard<std::mutex> l(mu_);
    room = kEnqueueQueueCap - std::min(kEnqueueQueueCap, enqueue_queue_.size());
    from = enqueue_read_offset_;
  }
  if (room == 0) return 0;  // back-pressure: enqueue put is behind
  int64_t max = store_->MaxQueueOffset(kTimerTopic, 0);
  if (from >= max) return 0;
  TOKIMQ_ASSIGN_OR_RETURN(
      std::vector<Message> msgs,
      store_->ReadQueue(kTimerTopic, 0, from, static_cast<int>(std::min<size_t>(room, 1024))));
  std::lock_guard<std::mutex> l(mu_);
  timer_max_queue_offset_ = std::max(timer_max_queue_offset_, max);
  if (msgs.empty()) {
    // Entries whose records were deleted by retention are skipped by ReadQueue.
    enqueue_read_offset_ = std::max(enqueue_read_offset_, max);
    return 0;
  }
  for (Message& m : msgs) {
    enqueue_read_offset_ = m.queue_offset + 1;
    enqueue_queue_.push_back(std::move(m));
  }
  return msgs.size();
}

absl::StatusOr<size_t> TimerStoreImpl::EnqueuePutStep() {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  while (!enqueue_queue_.empty() && n < 1024) {
    Message& m = enqueue_queue_.front();
    int64_t deliver = 0;
    int64_t target = -1;
    bool duplicate = m.physical_offset <= last_enqueued_phys_;  // already in the TimerLog
    if (duplicate) {
      // Recovery re-reads from the checkpointed queue offset; the TimerLog tail has these.
    } else if (!GetInt(m, timer_keys::DeliverMs(), &deliver)) {
      TOKIMQ_LOG_WARN("timerstore: timer-topic record at {} has no deliver time; skipped",
                      m.physical_offset);
    } else if (GetInt(m, timer_keys::DeleteOf(), &target)) {
      TimerUnit u;
      u.flags = kUnitDelete;
      u.write_ms = clock_->NowMs();
      u.deliver_ms = deliver;
      u.slot_tick = -1;
      u.phys_offset = m.physical_offset;
      u.ref = target;
      TOKIMQ_RETURN_IF_ERROR(timerlog_->Append(u).status());
      recalled_[target] = deliver;
      metrics_.pending.Sub(1);
      last_enqueued_phys_ = m.physical_offset;
    } else {
      TimerUnit u;
      u.deliver_ms = deliver;
      u.phys_offset = m.physical_offset;
      u.msg_size = static_cast<uint32_t>(m.EncodedSize());
      auto rt = m.properties.find(timer_keys::RealTopic());
      u.topic_hash = rt == m.properties.end() ? 0 : crc32c::Value(rt->second);
      TOKIMQ_RETURN_IF_ERROR(LinkUnitLocked(u).status());
      metrics_.pending.Add(1);
      pins_[m.physical_offset >> kPinBucketShift]++;
      last_enqueued_phys_ = m.physical_offset;
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
