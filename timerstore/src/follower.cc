// Follower mode (issue 20 item 3, docs/replication.md "The follower's timer store"): a
// replica's timer store runs the enqueue side on the replicated timer topic and follows the
// leader's releases without making any: the leader's delivered copies reach this store's
// CommitLog byte for byte, each naming its source record (TIMER_SRC_OFFSET, the same offset
// on every replica), and finish the unit of that source here. The wheel is walked as on a
// leader (so the read tick, the checkpoint and the pins advance); a due unit whose copy has
// not been copied yet is held until it is. Nothing here writes to the CommitLog.
//
// At promotion (AdoptAfterFollowing) only the follower's lag is left: the records copied since
// the last scan and the timer-topic records not enqueued yet. The held units go to the
// FineScheduler (the old leader had not released them, or its release was not copied: the
// bound docs/replication.md states), the remembered copies into recovery's dedup set.
#include <algorithm>
#include <chrono>
#include <latch>
#include <limits>

#include "common/logging.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "timer_store_impl.h"

namespace tokimq {

absl::StatusOr<size_t> TimerStoreImpl::FollowScanStep() {
  PhysicalOffset at;
  {
    std::lock_guard<std::mutex> l(mu_);
    followed_ = true;
    at = follow_scan_pos_;
  }
  CommitLog* log = store_->commit_log();
  const PhysicalOffset end = log->MaxOffset();
  at = std::max(at, log->MinOffset());
  std::vector<std::pair<PhysicalOffset, SeenCopy>> found;
  size_t n = 0;
  absl::Status error;
  // Only this thread (or AdoptReplicatedLog, with the threads stopped) moves follow_scan_pos_:
  // the records are read outside mu_.
  while (at < end && n < kFollowScanBatch) {
    auto next = log->ReadNext(at);
    if (!next.ok()) {
      error = next.status();
      break;
    }
    const Message& m = next->first;
    auto it = m.properties.find(kTimerSourceOffset);
    int64_t src = 0;
    if (m.topic != kTimerTopic && it != m.properties.end() && ParseInt64(it->second, &src)) {
      SeenCopy c;
      c.at = at;
      auto d = m.properties.find(prop::kDeliverMs);
      if (d != m.properties.end()) (void)ParseInt64(d->second, &c.deliver_ms);
      found.emplace_back(PhysicalOffset(src), c);
    }
    ++n;
    if (next->second <= at) break;
    at = next->second;
  }
  std::lock_guard<std::mutex> l(mu_);
  follow_scan_pos_ = at;
  for (const auto& [src, c] : found) MatchCopyLocked(src, c);
  if (!found.empty()) MaybeCompleteTicksLocked();
  if (!error.ok()) {
    uint64_t suppressed = 0;
    if (follow_log_.Allow(clock_->NowMs(), &suppressed)) {
      TOKIMQ_LOG_WARN("timerstore: follower scan stopped at CommitLog offset {}: {}", at,
                      error.ToString());
    }
    return error;
  }
  return n;
}

void TimerStoreImpl::FinishConfirmedLocked(const ScheduledUnit& su, PhysicalOffset at) {
  auto t = inflight_.find(su.accounted_tick);
  if (t != inflight_.end()) t->second.commitlog_start = std::min(t->second.commitlog_start, at);
  // A retention copy's message was counted once, for its original unit (which a follower,
  // following no moves, still holds: docs/replication.md "Timer moves across a failover").
  FinishUnitLocked(su, /*pending_decrement=*/(su.unit.flags & kUnitMovedCopy) == 0);
  metrics_.follower_confirmed.Add(1);
}

void TimerStoreImpl::MatchCopyLocked(PhysicalOffset src, SeenCopy copy) {
  auto h = held_.find(src);
  if (h != held_.end()) {
    const ScheduledUnit su = h->second;
    held_.erase(h);
    metrics_.follower_held.Set(static_cast<int64_t>(held_.size()));
    FinishConfirmedLocked(su, copy.at);
    return;
  }
  // Not due here yet (the leader's clock ran ahead, or this store walks or enqueues behind):
  // the settle step finds it when the unit comes due. The first copy of a source is kept.
  copies_seen_.try_emplace(src, copy);
}

void TimerStoreImpl::PruneCopiesSeenLocked() {
  if (copies_seen_.size() < copies_prune_at_) return;
  // A source below the pin has no pending unit left on this store (every pending unit pins its
  // CommitLog bucket): nothing can match it any more. Not past the last enqueued record: the
  // scan reads the CommitLog straight after the replication thread appended it, so a copy's
  // source may not be read by the enqueue side yet (PinLocked counts records not enqueued only
  // from the timer topic's end as the last enqueue read saw it). Dropping such a copy left
  // its unit held, and a promotion released it a second time (2026-12-02's 10-kill run).
  const PhysicalOffset pin = std::min(PinLocked(), last_enqueued_physical_offset_ + 1);
  absl::erase_if(copies_seen_, [&](const auto& kv) { return kv.first < pin; });
  copies_prune_at_ = std::max<size_t>(1024, 2 * copies_seen_.size());
}

absl::StatusOr<size_t> TimerStoreImpl::FollowerSettleStep() {
  std::lock_guard<std::mutex> l(mu_);
  followed_ = true;
  std::vector<ScheduledUnit> due;
  fine_.PopDue(clock_->NowMs(), 4096, &due);
  for (const ScheduledUnit& su : due) {
    const PhysicalOffset src = su.unit.physical_offset;
    if (recalled_.contains(src)) {
      FinishUnitLocked(su, /*pending_decrement=*/false);
      continue;
    }
    auto c = copies_seen_.find(src);
    if (c != copies_seen_.end()) {
      const PhysicalOffset at = c->second.at;
      copies_seen_.erase(c);
      FinishConfirmedLocked(su, at);
      continue;
    }
    if (delivered_phys_.contains(src)) {  // found by recovery's scan
      FinishUnitLocked(su, /*pending_decrement=*/(su.unit.flags & kUnitMovedCopy) == 0);
      continue;
    }
    held_.emplace(src, su);
  }
  metrics_.follower_held.Set(static_cast<int64_t>(held_.size()));
  MaybeCompleteTicksLocked();
  PruneCopiesSeenLocked();
  return due.size();
}

absl::Status TimerStoreImpl::RunFollowerUntilIdle() {
  while (true) {
    TOKIMQ_ASSIGN_OR_RETURN(size_t a, EnqueueGetStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t b, EnqueuePutStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t c, FollowScanStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t d, DequeueGetStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t e, FollowerSettleStep());
    if (a + b + c + d + e == 0) break;
  }
  std::lock_guard<std::mutex> l(mu_);
  RefreshGaugesLocked(clock_->NowMs());
  return absl::OkStatus();
}

void TimerStoreImpl::FollowerLoop() {
  int64_t backoff_ms = 0;
  while (!stopping_.load(std::memory_order_acquire)) {
    size_t n = 0;
    absl::Status st;
    for (auto step : {&TimerStoreImpl::EnqueueGetStep, &TimerStoreImpl::EnqueuePutStep,
                      &TimerStoreImpl::FollowScanStep, &TimerStoreImpl::DequeueGetStep,
                      &TimerStoreImpl::FollowerSettleStep}) {
      absl::StatusOr<size_t> r = (this->*step)();
      if (r.ok()) {
        n += *r;
      } else if (st.ok()) {
        st = r.status();
      }
    }
    if (!st.ok()) {
      // Logged by the step (rate-limited) or here; retried with backoff, never fatal: the
      // follower's CommitLog keeps being copied whatever its timer store does.
      backoff_ms = std::clamp<int64_t>(backoff_ms * 2, 10, 1000);
      uint64_t suppressed = 0;
      if (follow_log_.Allow(clock_->NowMs(), &suppressed)) {
        TOKIMQ_LOG_WARN("timerstore: follower step: {}", st.ToString());
      }
      std::unique_lock<std::mutex> l(run_mu_);
      run_cv_.wait_for(l, std::chrono::milliseconds(backoff_ms), [&] { return stopping_.load(); });
      continue;
    }
    backoff_ms = 0;
    if (n > 0) continue;
    // Idle: the enqueue thread's wait (kEnqueuePollMs of real time, or Stop). Copies and
    // timer-topic records are found at the next poll; a follower releases nothing, so a few
    // ms later only delays its bookkeeping.
    WaitForEnqueueWork();
  }
}

absl::Status TimerStoreImpl::StartFollowing() {
  std::lock_guard<std::mutex> l(run_mu_);
  if (!threads_.empty()) return absl::FailedPreconditionError("timerstore: already started");
  {
    std::lock_guard<std::mutex> ml(mu_);
    followed_ = true;
  }
  stopping_ = false;
  std::latch ready(2);
  threads_.emplace_back([this, &ready] {
    if (options_.service_nice != 0) SetThreadNice(options_.service_nice, true);
    ready.count_down();
    FollowerLoop();
  });
  threads_.emplace_back([this, &ready] {
    if (options_.service_nice != 0) SetThreadNice(options_.service_nice, false);
    ready.count_down();
    CheckpointLoop();
  });
  ready.wait();
  TOKIMQ_LOG_INFO("timerstore: following the replicated timer topic (no releases)");
  return absl::OkStatus();
}

absl::Status TimerStoreImpl::AdoptAfterFollowing() {
  // What the follower had not read yet: the records copied since its last scan, then the
  // timer-topic records not yet enqueued (its enqueue lag; both ~0 when it kept up).
  int64_t scanned = 0;
  while (true) {
    TOKIMQ_ASSIGN_OR_RETURN(size_t n, FollowScanStep());
    scanned += static_cast<int64_t>(n);
    if (n == 0) break;
  }
  int64_t enqueued = 0;
  while (true) {
    TOKIMQ_ASSIGN_OR_RETURN(size_t got, EnqueueGetStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t put, EnqueuePutStep());
    enqueued += static_cast<int64_t>(put);
    if (got + put == 0) break;
  }
  size_t held = 0, seen = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    // Held units: due, and no copy of them in the log: this store releases them now.
    std::vector<ScheduledUnit> run;
    run.reserve(held_.size());
    for (auto& [src, su] : held_) run.push_back(su);
    held_.clear();
    metrics_.follower_held.Set(0);
    held = run.size();
    std::sort(run.begin(), run.end(), FineScheduler::RunOrder);
    AddRunLocked(std::move(run));
    // Copies whose unit was not due here yet: the walk, a late link and dequeue read skip
    // their units (delivered_phys_), as after a recovery; the checkpoint keeps the scan start
    // at the earliest of them until the read tick passes their ticks (dedup window).
    seen = copies_seen_.size();
    if (!copies_seen_.empty()) {
      const int64_t read_tick = ReadTickLocked();
      PhysicalOffset from(std::numeric_limits<int64_t>::max());
      int64_t until = read_tick;
      for (const auto& [src, c] : copies_seen_) {
        delivered_phys_.insert(src);
        from = std::min(from, c.at);
        until = std::max(until, c.deliver_ms > 0 ? std::max(TickOf(c.deliver_ms), read_tick) + 2
                                                 : read_tick + slots_total_);
      }
      if (dedup_until_tick_ >= 0) {
        dedup_commitlog_from_ = std::min(dedup_commitlog_from_, from);
      } else {
        dedup_commitlog_from_ = from;
        dedup_timerlog_from_ = timerlog_->WritePos();
      }
      dedup_until_tick_ = std::max(dedup_until_tick_, until);
      copies_seen_.clear();
    }
    followed_ = false;
  }
  TOKIMQ_LOG_INFO(
      "timerstore: adopting the replicated log after following it: scanned {} CommitLog "
      "records, enqueued {} timer-topic records; {} due units not released by the previous "
      "leader, {} released ahead of this store's clock",
      scanned, enqueued, held, seen);
  return Checkpoint();
}

}  // namespace tokimq
