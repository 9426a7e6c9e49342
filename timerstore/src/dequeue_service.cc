// Dequeue services: due wheel slots -> FineScheduler -> loaded copies -> real topics.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "delivered_copy.h"
#include "timer_store_impl.h"

namespace tokimq {
namespace {

constexpr int64_t kRecallGraceTicksMs = 10 * 60 * 1000;  // keep recalled ids 10 min past due

}  // namespace

absl::StatusOr<size_t> TimerStoreImpl::DequeueGetStep() {
  std::unique_lock<std::mutex> l(mu_);
  if (fine_.size() >= kMaxLoadedUnits) return 0;  // back-pressure
  int64_t now = clock_->NowMs();
  int64_t p = options_.precision_ms;
  size_t progressed = 0;
  // Walk slots one tick before they begin. Empty slots cost one in-memory look-up each, so
  // catching up after a long downtime is fast.
  // Walk a slot once now >= its start - P; after recovery, slots holding units linked past
  // their own tick at once (their units may be due before that).
  const int64_t limit = std::max(TickOf(now) + 2, eager_walk_until_);
  while (next_walk_tick_ < limit) {
    int64_t tick = wheel_->NextLiveTick(next_walk_tick_, limit);
    if (tick != next_walk_tick_) {
      next_walk_tick_ = tick;
      ++progressed;
      continue;
    }
    TimerSlot slot = wheel_->Get(tick);
    // Records where this tick's puts and roll units begin. The walk itself counts as an
    // outstanding unit of the tick until the units are loaded: while the chain is read outside
    // mu_, the tick cannot complete, nor the (checkpointed) read tick pass it. (Left counted
    // if loading fails: the tick then stays unfinished, and recovery walks it again.)
    InflightLocked(tick).outstanding++;
    ++next_walk_tick_;
    // Walk the chain outside mu_: units are immutable, and later units for this tick go to
    // the FineScheduler directly from LinkUnitLocked.
    l.unlock();
    std::vector<std::pair<int64_t, TimerUnit>> chain;
    chain.reserve(slot.count);
    int64_t pos = slot.last_pos;
    absl::Status walk_status;
    while (pos >= 0) {
      auto u = timerlog_->Read(pos);
      if (!u.ok()) {
        walk_status = u.status();
        break;
      }
      if (u->slot_tick != tick || u->prev_pos >= pos) {
        walk_status = absl::DataLossError(absl::StrCat("timerlog: broken chain at ", pos));
        break;
      }
      chain.emplace_back(pos, *u);
      pos = u->prev_pos;
    }
    if (!walk_status.ok()) {
      TOKIMQ_LOG_ERROR("timerstore: walking slot of tick {}: {}; remaining units skipped", tick,
                       walk_status.ToString());
    }
    // Oldest first, so continuations keep enqueue order. The units to deliver are sorted into
    // one FineScheduler run here, outside mu_: pushing a busy slot's 100k units into the heap
    // under mu_ held up dequeue read and put for 6-25 ms once per tick (release p99).
    std::vector<std::pair<int64_t, TimerUnit>> rolls;
    std::vector<ScheduledUnit> run;
    run.reserve(chain.size());
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if (it->second.flags == kUnitRoll) {
        rolls.push_back(*it);
      } else {
        run.push_back(ScheduledUnit{it->first, it->second, tick});
      }
    }
    std::sort(run.begin(), run.end(), FineScheduler::RunOrder);
    l.lock();
    for (const auto& [upos, unit] : rolls) {
      ScheduledUnit su{upos, unit, tick};
      if (recalled_.contains(unit.phys_offset)) {
        InflightLocked(tick).outstanding++;
        FinishUnitLocked(su, /*pending_decrement=*/false);
        continue;
      }
      if (rolled_from_.contains(upos)) continue;  // continuation written before a crash
      TimerUnit next = unit;
      next.ref = upos;
      next.roll_count = unit.roll_count + 1;
      TOKIMQ_RETURN_IF_ERROR(LinkUnitLocked(next).status());
      metrics_.rolled.Add(1);
    }
    // The sets are empty in steady state (they fill after recovery or with recalls).
    const bool check = !handed_early_.empty() || !recalled_.empty() || !delivered_phys_.empty();
    InflightTick& inflight = InflightLocked(tick);  // a map entry: stays put while counted
    size_t kept = 0;
    for (size_t i = 0; i < run.size(); ++i) {
      const ScheduledUnit& su = run[i];
      // Linked after its own tick was walked: LinkUnitLocked already handed it over.
      if (check && handed_early_.erase(su.pos) > 0) continue;
      inflight.outstanding++;
      if (check && recalled_.contains(su.unit.phys_offset)) {
        FinishUnitLocked(su, /*pending_decrement=*/false);
      } else if (check && delivered_phys_.contains(su.unit.phys_offset)) {
        FinishUnitLocked(su, /*pending_decrement=*/true);  // delivered before the crash
      } else {
        if (kept != i) run[kept] = std::move(run[i]);
        ++kept;
      }
    }
    run.resize(kept);
    AddRunLocked(std::move(run));
    inflight.outstanding--;  // the walk's own count
    ++progressed;
    break;  // one non-empty slot per step keeps the step bounded
  }
  MaybeCompleteTicksLocked();
  int64_t read_tick = ReadTickLocked();
  if (dedup_until_tick_ >= 0 && read_tick > dedup_until_tick_) {
    delivered_phys_.clear();
    rolled_from_.clear();
    dedup_until_tick_ = -1;
  }
  if (progressed > 0 && !recalled_.empty() && recalled_.size() % 1024 == 0) {
    absl::erase_if(recalled_,
                   [&](const auto& kv) { return kv.second + kRecallGraceTicksMs < read_tick * p; });
  }
  return progressed;
}

absl::StatusOr<size_t> TimerStoreImpl::DequeueReadStep() {
  std::vector<ScheduledUnit> due;
  {
    std::lock_guard<std::mutex> l(mu_);
    size_t room = kPutQueueCap - std::min(kPutQueueCap, put_queue_.size());
    if (room == 0) return 0;
    fine_.PopDue(clock_->NowMs(), std::min<size_t>(room, 512), &due);
    // Recalled while loaded: never delivered.
    auto keep = std::remove_if(due.begin(), due.end(), [&](const ScheduledUnit& su) {
      if (!recalled_.contains(su.unit.phys_offset)) return false;
      FinishUnitLocked(su, false);
      return true;
    });
    due.erase(keep, due.end());
    MaybeCompleteTicksLocked();
  }
  if (due.empty()) return 0;
  std::vector<LoadedCopy> loaded;
  loaded.reserve(due.size());
  std::vector<ScheduledUnit> dropped;
  int64_t now = clock_->NowMs();
  // One batched read: records enqueued close together share a pread. Each delivered copy is
  // built straight from the record view (no decoded timer-topic Message to rewrite), with its
  // properties as record bytes (DeliveredCopy: no map built, PutBatch copies them verbatim).
  std::vector<ReadRequest> reqs;
  reqs.reserve(due.size());
  for (const ScheduledUnit& su : due) reqs.push_back({su.unit.phys_offset, su.unit.msg_size});
  std::vector<std::optional<Message>> copies(due.size());
  std::vector<absl::Status> errors(due.size());
  store_->VisitMany(reqs, [&](size_t i, const absl::StatusOr<record::RecordView>& read) {
    if (!read.ok()) {
      errors[i] = read.status();
      return;
    }
    const ScheduledUnit& su = due[i];
    copies[i] = DeliveredCopy(*read, su, now);
  });
  std::vector<ScheduledUnit> retry;  // transient read errors (issue 25): never dropped
  for (size_t i = 0; i < due.size(); ++i) {
    ScheduledUnit& su = due[i];
    if (!copies[i] && absl::IsResourceExhausted(errors[i])) {
      retry.push_back(std::move(su));
      continue;
    }
    if (!copies[i]) {
      TOKIMQ_LOG_WARN("timerstore: unit at {} points to CommitLog offset {} ({}); dropped", su.pos,
                      su.unit.phys_offset,
                      errors[i].ok() ? "record mismatch" : errors[i].ToString());
      dropped.push_back(su);
      continue;
    }
    loaded.push_back(LoadedCopy{std::move(su), std::move(*copies[i])});
  }
  std::lock_guard<std::mutex> l(mu_);
  for (const ScheduledUnit& su : dropped) {
    metrics_.dropped.Add(1);
    FinishUnitLocked(su, true);
  }
  MaybeCompleteTicksLocked();
  for (LoadedCopy& c : loaded) put_queue_.push_back(std::move(c));
  if (!retry.empty()) {
    // Back to the millisecond stage; the worker backs off on this status (WorkerLoop).
    absl::Status st;
    for (const absl::Status& e : errors) {
      if (absl::IsResourceExhausted(e)) {
        st = e;
        break;
      }
    }
    for (ScheduledUnit& su : retry) AddFineLocked(std::move(su));
    return st;
  }
  return due.size();
}

absl::StatusOr<size_t> TimerStoreImpl::DequeuePutStep() {
  std::vector<LoadedCopy> batch;
  {
    std::lock_guard<std::mutex> l(mu_);
    while (!put_queue_.empty() && batch.size() < 256) {
      batch.push_back(std::move(put_queue_.front()));
      put_queue_.pop_front();
    }
  }
  if (batch.empty()) return 0;
  std::vector<Message> msgs;
  msgs.reserve(batch.size());
  for (LoadedCopy& c : batch) msgs.push_back(std::move(c.msg));
  auto put = store_->PutBatch(std::move(msgs));
  std::lock_guard<std::mutex> l(mu_);
  if (!put.ok()) {
    // Nothing reported appended: back to the millisecond stage for a retry.
    for (LoadedCopy& c : batch) AddFineLocked(std::move(c.su));
    return put.status();
  }
  int64_t now = clock_->NowMs();
  for (const LoadedCopy& c : batch) {
    metrics_.delivered.Add(1);
    metrics_.lateness_ms.Record(now - c.su.unit.deliver_ms);
    FinishUnitLocked(c.su, true);
  }
  MaybeCompleteTicksLocked();
  return batch.size();
}

}  // namespace tokimq
