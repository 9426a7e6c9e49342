// Scheduling: Schedule and ScheduleBatch rewrite a message for the timer topic (or deliver it
// now) and put it; Recall cancels one by its handle with a delete marker. docs/timerstore.md.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/names.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "prop_keys.h"
#include "schedule_rewrite.h"
#include "timer_store_impl.h"
#include "timerstore/recall_handle.h"

namespace tokimq {
namespace {

// The real destination of a scheduled message, checked at Schedule: a message the name rule
// refuses would only be parked at its deliver time (issue 14).
absl::Status CheckRealDestination(const Message& m) {
  TOKIMQ_RETURN_IF_ERROR(ValidateDestination(m.topic));
  if (m.queue_id < 0)
    return absl::InvalidArgumentError(absl::StrCat("invalid queue id ", m.queue_id));
  return absl::OkStatus();
}

bool ParseInt(const std::map<std::string, std::string>& props, const char* key, int64_t* v) {
  auto it = props.find(key);
  if (it == props.end()) return false;
  return ParseInt64(it->second, v);
}

}  // namespace

absl::StatusOr<std::vector<ScheduleResult>> TimerStore::ScheduleBatch(
    std::vector<ScheduleItem> items) {
  std::vector<ScheduleResult> out;
  out.reserve(items.size());
  for (ScheduleItem& item : items) {
    TOKIMQ_ASSIGN_OR_RETURN(ScheduleResult r, Schedule(std::move(item.msg), item.deliver_ms));
    out.push_back(std::move(r));
  }
  return out;
}

void TimerStoreImpl::NoteTimerPuts(QueueOffset max_queue_offset, int64_t earliest_deliver_ms) {
  {
    std::lock_guard<std::mutex> l(mu_);
    timer_max_queue_offset_ = std::max(timer_max_queue_offset_, max_queue_offset + 1);
    metrics_.enqueue_lag.Set(std::max<int64_t>(0, timer_max_queue_offset_ - enqueue_offset_));
  }
  // Due later than the horizon: the enqueue thread's poll (kEnqueuePollMs) links it long
  // before its deliver time (see TimerStoreOptions::enqueue_wake_horizon_ms).
  const int64_t horizon = options_.enqueue_wake_horizon_ms;
  if (horizon > 0 && earliest_deliver_ms != INT64_MIN &&
      earliest_deliver_ms - clock_->NowMs() >= horizon) {
    return;
  }
  WakeEnqueue();
}

void TimerStoreImpl::WakeEnqueue() {
  metrics_.enqueue_wakes.Add(1);
  bool notify;
  {
    std::lock_guard<std::mutex> l(run_mu_);
    notify = enqueue_sleeping_ && !enqueue_kick_;
    enqueue_kick_ = true;
  }
  if (notify) enqueue_cv_.notify_one();
}

absl::StatusOr<ScheduleResult> TimerStoreImpl::Schedule(Message msg, int64_t deliver_ms) {
  TOKIMQ_RETURN_IF_ERROR(CheckRealDestination(msg));
  ScheduleResult result;
  uint32_t id_crc = RecallHandle::IdCrcOf(msg);
  result.delivered_now = RewriteForSchedule(&msg, deliver_ms, clock_->NowMs());
  TOKIMQ_ASSIGN_OR_RETURN(result.put, store_->Put(std::move(msg)));
  if (result.delivered_now) {
    metrics_.delivered.Add(1);
  } else {
    NoteTimerPuts(result.put.queue_offset, deliver_ms);
  }
  result.recall_handle = RecallHandle{result.put.physical_offset, deliver_ms, id_crc}.Encode();
  return result;
}

absl::StatusOr<std::vector<ScheduleResult>> TimerStoreImpl::ScheduleBatch(
    std::vector<ScheduleItem> items) {
  return ScheduleItems(std::move(items), /*wait_durable=*/true);
}

absl::StatusOr<std::vector<ScheduleResult>> TimerStoreImpl::ScheduleBatchNoWait(
    std::vector<ScheduleItem> items) {
  return ScheduleItems(std::move(items), /*wait_durable=*/false);
}

absl::StatusOr<std::vector<ScheduleResult>> TimerStoreImpl::ScheduleItems(
    std::vector<ScheduleItem> items, bool wait_durable) {
  std::vector<ScheduleResult> out(items.size());
  if (items.empty()) return out;
  for (const ScheduleItem& item : items) TOKIMQ_RETURN_IF_ERROR(CheckRealDestination(item.msg));
  std::vector<uint32_t> id_crcs(items.size());
  std::vector<Message> msgs;
  msgs.reserve(items.size());
  const int64_t now = clock_->NowMs();
  int64_t due_now = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    id_crcs[i] = RecallHandle::IdCrcOf(items[i].msg);
    out[i].delivered_now = RewriteForSchedule(&items[i].msg, items[i].deliver_ms, now);
    due_now += out[i].delivered_now ? 1 : 0;
    msgs.push_back(std::move(items[i].msg));
  }
  TOKIMQ_ASSIGN_OR_RETURN(
      std::vector<PutResult> puts,
      wait_durable ? store_->PutBatch(std::move(msgs)) : store_->PutBatchNoWait(std::move(msgs)));
  if (puts.size() != items.size()) {
    return absl::InternalError("timerstore: PutBatch returned a wrong number of results");
  }
  QueueOffset max_timer_offset = QueueOffset::kNone();
  int64_t earliest_deliver = INT64_MAX;
  for (size_t i = 0; i < items.size(); ++i) {
    out[i].put = puts[i];
    out[i].recall_handle =
        RecallHandle{puts[i].physical_offset, items[i].deliver_ms, id_crcs[i]}.Encode();
    if (!out[i].delivered_now) {
      max_timer_offset = std::max(max_timer_offset, puts[i].queue_offset);
      earliest_deliver = std::min(earliest_deliver, items[i].deliver_ms);
    }
  }
  if (due_now > 0) metrics_.delivered.Add(due_now);
  if (max_timer_offset != QueueOffset::kNone()) NoteTimerPuts(max_timer_offset, earliest_deliver);
  return out;
}

absl::Status TimerStoreImpl::Recall(std::string_view text) {
  TOKIMQ_ASSIGN_OR_RETURN(RecallHandle h, RecallHandle::Decode(text));
  auto read = store_->Read(h.physical_offset);
  bool moved = false;
  if (!read.ok()) {
    // Below the move frontier the record was given up by retention: a message still pending
    // lives on as a copy naming it in TIMER_ORIGIN_OFFSET, which dequeue checks against the
    // recalled set. Its id cannot be checked here any more (the handle's deliver time and the
    // clock still are): docs/timerstore.md "Retention moves".
    std::lock_guard<std::mutex> l(mu_);
    moved = absl::IsNotFound(read.status()) && h.physical_offset < moves_.frontier &&
            h.physical_offset >= PhysicalOffset(0);
    if (!moved) {
      return absl::NotFoundError(
          absl::StrCat("recall: no scheduled message for handle (", read.status().message(), ")"));
    }
  }
  if (!moved) {
    const Message& m = *read;
    int64_t deliver = 0;
    if (RecallHandle::IdCrcOf(m) != h.id_crc || !ParseInt(m.properties, prop::kDeliverMs, &deliver) ||
        deliver != h.deliver_ms || m.properties.count(kTimerDeleteOf) != 0) {
      return absl::NotFoundError("recall: no scheduled message for handle");
    }
    if (m.topic != kTimerTopic) return absl::FailedPreconditionError("recall: already delivered");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (recalled_.contains(h.physical_offset)) {
      return absl::FailedPreconditionError("recall: already recalled");
    }
    // Nothing is ever put before its deliver time, and PopDue reads the clock under mu_ too:
    // before the deliver time the message cannot have been delivered yet.
    if (clock_->NowMs() >= h.deliver_ms || TickOf(h.deliver_ms) < ReadTickLocked()) {
      return absl::FailedPreconditionError("recall: already delivered");
    }
    recalled_[h.physical_offset] = h.deliver_ms;
  }
  // Durable mark: a delete marker in the timer topic (as RocketMQ 5.3 does); enqueue turns it
  // into a delete unit in the TimerLog.
  Message marker;
  marker.topic = kTimerTopic;
  marker.queue_id = 0;
  marker.born_ms = clock_->NowMs();
  marker.properties[prop::kDeliverMs] = std::to_string(h.deliver_ms);
  marker.properties[kTimerDeleteOf] = std::to_string(h.physical_offset.value());
  auto put = store_->Put(std::move(marker));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!put.ok()) {
      recalled_.erase(h.physical_offset);
      return put.status();
    }
    timer_max_queue_offset_ = std::max(timer_max_queue_offset_, put->queue_offset + 1);
    metrics_.recalled.Add(1);
  }
  WakeEnqueue();
  return absl::OkStatus();
}

}  // namespace tokimq
