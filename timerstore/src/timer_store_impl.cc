// TimerStoreImpl: open, the wheel and TimerLog bookkeeping under mu_ (link, finish, pins,
// gauges, the pending-by-delay seed), RunUntilIdle. Scheduling and recall live in schedule.cc,
// checkpoints in checkpointing.cc, recovery in recovery.cc, the services in enqueue_service.cc,
// dequeue_walk.cc, dequeue_service.cc and service_threads.cc.
#include "timer_store_impl.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/names.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "prop_keys.h"

namespace tokimq {

absl::StatusOr<std::unique_ptr<TimerStore>> TimerStore::Open(FileSystem* fs, Clock* clock,
                                                             MessageStore* store,
                                                             TimerStoreOptions options) {
  if (options.precision_ms <= 0 || options.window_ms < 2 * options.precision_ms) {
    return absl::InvalidArgumentError("timerstore: need precision_ms > 0, window >= 2 ticks");
  }
  auto impl = std::make_unique<TimerStoreImpl>(fs, clock, store, std::move(options));
  TOKIMQ_RETURN_IF_ERROR(impl->Recover());
  return std::unique_ptr<TimerStore>(std::move(impl));
}

TimerStoreImpl::TimerStoreImpl(FileSystem* fs, Clock* clock, MessageStore* store,
                               TimerStoreOptions options)
    : fs_(fs), clock_(clock), store_(store), options_(std::move(options)) {
  slots_total_ = options_.window_ms / options_.precision_ms;
}

TimerStoreImpl::~TimerStoreImpl() {
  if (!threads_.empty()) (void)Stop();
  if (hook_id_ != 0) store_->RemoveRetentionHook(hook_id_);
  if (pin_id_ != 0) store_->RemovePinProvider(pin_id_);
  if (pin_cell_) {
    std::lock_guard<std::mutex> l(pin_cell_->mu);
    pin_cell_->owner = nullptr;
  }
}

int64_t TimerStoreImpl::TickOf(int64_t ms) const {
  int64_t p = options_.precision_ms;
  return ms >= 0 ? ms / p : -((-ms + p - 1) / p);
}

int64_t TimerStoreImpl::ReadTickLocked() const {
  if (inflight_.empty()) return next_walk_tick_;
  return std::min(inflight_.begin()->first, next_walk_tick_);
}

TimerStoreImpl::InflightTick& TimerStoreImpl::InflightLocked(int64_t tick) {
  auto it = inflight_.find(tick);
  if (it != inflight_.end()) return it->second;
  InflightTick& t = inflight_[tick];
  t.commitlog_start = store_->commit_log()->MaxOffset();
  t.timerlog_start = timerlog_->WritePos();
  return t;
}

absl::StatusOr<TimerLogPosition> TimerStoreImpl::LinkUnitLocked(TimerUnit u) {
  int64_t read_tick = ReadTickLocked();
  int64_t tick = TickOf(u.deliver_ms);
  int64_t slot;
  const uint32_t bits = u.flags & ~kUnitKindMask;  // kUnitMovedCopy stays with the message
  if (tick >= read_tick + slots_total_) {
    // Beyond the window measured from the read time (RocketMQ): park inside the window.
    u.flags = kUnitRoll | bits;
    slot = std::max(read_tick + slots_total_ - 1, next_walk_tick_);
  } else {
    u.flags = kUnitNormal | bits;
    slot = std::max(tick, read_tick);
  }
  u.slot_tick = slot;
  u.prev_pos = wheel_->Get(slot).last_pos;
  u.write_ms = clock_->NowMs();
  // Its own tick was already walked but `slot` was not (slot == next_walk_tick_, no walked
  // tick in flight): see below. Units recovery knows as delivered or recalled are left to the
  // walk, which settles them.
  const bool early = slot >= next_walk_tick_ && UnitKind(u.flags) == kUnitNormal &&
                     tick < next_walk_tick_ && !delivered_phys_.contains(u.physical_offset) &&
                     !recalled_.contains(u.physical_offset);
  // Before the append, so the tick's TimerLog start (recovery's tail scan) covers the unit.
  if (early) InflightLocked(slot);
  TOKIMQ_ASSIGN_OR_RETURN(TimerLogPosition pos, timerlog_->Append(u));
  wheel_->Link(slot, pos);
  if (slot < next_walk_tick_) {
    // The slot was already walked: hand the unit to the millisecond stage directly.
    InflightTick& t = InflightLocked(slot);
    t.outstanding++;
    t.min_phys = std::min(t.min_phys, u.physical_offset);
    AddFineLocked(ScheduledUnit{pos, u, slot});
  } else if (early) {
    // The walk of `slot` may come up to two ticks after the unit's deliver time. Hand it to
    // the millisecond stage now, accounted to that slot (the checkpoint's read tick and
    // CommitLog scan start then stay at or before its delivery), and have that walk skip it.
    // After a crash the skip set is gone: recovery walks such slots at once (see
    // eager_walk_until_), finds the unit again and the CommitLog scan (TIMER_SRC_OFFSET)
    // deduplicates it.
    InflightTick& t = InflightLocked(slot);
    t.outstanding++;
    t.min_phys = std::min(t.min_phys, u.physical_offset);
    handed_early_.insert(pos);
    AddFineLocked(ScheduledUnit{pos, u, slot});
  }
  return pos;
}

void TimerStoreImpl::FinishUnitLocked(const ScheduledUnit& su, bool pending_decrement) {
  auto it = inflight_.find(su.accounted_tick);
  if (it == inflight_.end()) return;
  InflightTick& t = it->second;
  if (pending_decrement) {
    metrics_.pending.Sub(1);
    pending_by_delay_.Sub(TickOf(su.unit.deliver_ms));
    t.done_pending++;
  }
  t.pin_release[PinBucketOf(su.unit.physical_offset)]++;
  t.outstanding--;
}

void TimerStoreImpl::MaybeCompleteTicksLocked() {
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    if (it->second.outstanding > 0 || it->first >= next_walk_tick_) {
      ++it;
      continue;
    }
    for (const auto& [bucket, n] : it->second.pin_release) {
      auto p = pins_.find(bucket);
      if (p == pins_.end()) continue;
      p->second -= n;
      if (p->second <= 0) pins_.erase(p);
    }
    it = inflight_.erase(it);
  }
}

PhysicalOffset TimerStoreImpl::PinLocked() const {
  PhysicalOffset pin(std::numeric_limits<int64_t>::max());
  // Everything below the move frontier is superseded (moved or gone): a bucket that holds the
  // frontier pins from the frontier only.
  auto first = pins_.lower_bound(PinBucketOf(moves_.frontier));
  if (first != pins_.end()) {
    pin = std::max(PhysicalOffset(first->first << kPinBucketShift), moves_.frontier);
  }
  if (enqueue_offset_ < timer_max_queue_offset_) {
    // Records not yet enqueued lie past last_enqueued_physical_offset_, and never below the
    // frontier (a move commits only with everything below it enqueued; its copies lie above it).
    pin = std::min(pin, std::max(last_enqueued_physical_offset_ + 1, moves_.frontier));
  }
  return pin;
}

void TimerStoreImpl::RefreshGaugesLocked(int64_t now) {
  int64_t counts[PendingByDelay::kBuckets];
  pending_by_delay_.Buckets(now, options_.precision_ms, counts);
  for (int b = 0; b < PendingByDelay::kBuckets; ++b) metrics_.pending_by_bucket[b].Set(counts[b]);
  metrics_.enqueue_lag.Set(std::max<int64_t>(0, timer_max_queue_offset_ - enqueue_offset_));
  // The oldest tick with due work left: a walked tick whose units are not all finished, or a
  // due slot not walked yet. (The read tick alone said nothing: it trails by a tick or two when
  // all is done, and the gauge kept the value of the last checkpoint, e.g. 55 min on a manual
  // clock advanced by that much, after everything was delivered.)
  int64_t oldest = std::numeric_limits<int64_t>::max();
  for (const auto& [tick, t] : inflight_) {
    if (t.outstanding > 0) {
      oldest = tick;
      break;
    }
  }
  const int64_t due_limit = std::min(TickOf(now) + 1, oldest);
  for (int64_t t = wheel_->NextLiveTick(next_walk_tick_, due_limit); t < due_limit;
       t = wheel_->NextLiveTick(t + 1, due_limit)) {
    if (wheel_->Get(t).count > 0) {
      oldest = t;
      break;
    }
  }
  const int64_t lag = oldest == std::numeric_limits<int64_t>::max()
                          ? 0
                          : now - (oldest + 1) * options_.precision_ms;
  metrics_.dequeue_lag_ms.Set(std::max<int64_t>(0, lag));
}

void TimerStoreImpl::RefreshGauges() {
  {
    std::lock_guard<std::mutex> l(mu_);
    RefreshGaugesLocked(clock_->NowMs());
  }
  RefreshRetentionGauges(/*expired_end=*/PhysicalOffset::kNone());
}

DueCounts TimerStoreImpl::PendingByDueTime(int64_t bucket_ms, int buckets) const {
  DueCounts d;
  d.bucket_ms = bucket_ms;
  if (bucket_ms <= 0 || buckets <= 0) return d;
  d.counts.resize(static_cast<size_t>(buckets));
  std::lock_guard<std::mutex> l(mu_);
  d.now_ms = clock_->NowMs();
  d.later = pending_by_delay_.CountByDueTime(d.now_ms, options_.precision_ms, bucket_ms, &d.counts);
  return d;
}

void TimerStoreImpl::SeedPendingByDelayLocked(int64_t read_tick) {
  pending_by_delay_.Clear();
  const int64_t limit = read_tick + slots_total_ + 1;
  for (int64_t t = wheel_->NextLiveTick(read_tick, limit); t < limit;
       t = wheel_->NextLiveTick(t + 1, limit)) {
    pending_by_delay_.Add(t, wheel_->Get(t).count);
  }
  seed_end_pos_ = timerlog_->WritePos();
  seed_from_tick_ = read_tick;
  seed_until_tick_ = limit;
  // Recalled messages left `pending` when their recall was enqueued; their units stay in the
  // wheel until walked. Normal units sit in the slot of their deliver tick: uncounted there now.
  // (A recalled roll unit sits elsewhere: its walk takes it from its slot, and this Sub then
  // found nothing, or took the count of another message due in the same tick until that one is
  // delivered. Recalls of messages beyond the wheel window only; counted in underflows().)
  seed_recalled_.clear();
  for (const auto& [phys, deliver] : recalled_) {
    const int64_t tick = TickOf(deliver);
    if (tick < read_tick || tick >= limit) continue;
    seed_recalled_.insert(phys);
    pending_by_delay_.Sub(tick);
  }
}

void TimerStoreImpl::SettleSeededLocked(const ScheduledUnit& su, bool recalled, bool stale_roll) {
  if (!SeededLocked(su)) return;
  const int64_t slot = su.unit.slot_tick;
  const int64_t deliver_tick = TickOf(su.unit.deliver_ms);
  if (stale_roll) {
    pending_by_delay_.Sub(slot);
    return;
  }
  if (recalled && seed_recalled_.contains(su.unit.physical_offset)) {
    if (deliver_tick != slot) pending_by_delay_.Sub(slot);  // the seed took it at deliver_tick
    return;
  }
  if (deliver_tick == slot) return;
  pending_by_delay_.Sub(slot);
  pending_by_delay_.Add(deliver_tick);
}

absl::Status TimerStoreImpl::RunUntilIdle() {
  while (true) {
    size_t total = 0;
    TOKIMQ_ASSIGN_OR_RETURN(size_t a, EnqueueGetStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t b, EnqueuePutStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t c, DequeueGetStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t d, DequeueReadStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t e, DequeuePutStep());
    total = a + b + c + d + e;
    if (total == 0) break;
  }
  std::lock_guard<std::mutex> l(mu_);
  RefreshGaugesLocked(clock_->NowMs());
  return absl::OkStatus();
}

void TimerStoreImpl::AddFineLocked(ScheduledUnit su) {
  const bool wake = su.unit.deliver_ms < read_wake_ms_;
  fine_.Add(std::move(su));
  if (wake) read_cv_.notify_one();
}

void TimerStoreImpl::AddRunLocked(std::vector<ScheduledUnit> run) {
  const bool wake = !run.empty() && run.front().unit.deliver_ms < read_wake_ms_;
  fine_.AddRun(std::move(run));
  if (wake) read_cv_.notify_one();
}

}  // namespace tokimq
