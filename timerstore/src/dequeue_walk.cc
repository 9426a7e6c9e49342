// Dequeue get: walks each due wheel slot (one tick before it begins), continues its roll units
// into later slots and hands the rest to the FineScheduler as one sorted run.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "timer_store_impl.h"

namespace tokimq {
namespace {

constexpr int64_t kRecallGraceTicksMs = 10 * 60 * 1000;  // keep recalled ids 10 min past due

}  // namespace

absl::StatusOr<size_t> TimerStoreImpl::DequeueGetStep() {
  std::unique_lock<std::mutex> l(mu_);
  // Back-pressure; a follower's held units (follower.cc) count as loaded.
  if (fine_.size() + held_.size() >= kMaxLoadedUnits) return 0;
  int64_t now = clock_->NowMs();
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
    std::vector<std::pair<TimerLogPosition, TimerUnit>> rolls;
    std::vector<ScheduledUnit> run;
    ReadSlotChain(tick, slot, &rolls, &run);
    l.lock();
    TOKIMQ_RETURN_IF_ERROR(ContinueRollsLocked(tick, rolls));
    HandOverRunLocked(tick, std::move(run));
    ++progressed;
    break;  // one non-empty slot per step keeps the step bounded
  }
  FinishWalkStepLocked(progressed);
  return progressed;
}

void TimerStoreImpl::ReadSlotChain(int64_t tick, const TimerSlot& slot,
                                   std::vector<std::pair<TimerLogPosition, TimerUnit>>* rolls,
                                   std::vector<ScheduledUnit>* run) const {
  std::vector<std::pair<TimerLogPosition, TimerUnit>> chain;
  chain.reserve(slot.count);
  TimerLogPosition pos = slot.last_pos;
  absl::Status walk_status;
  while (pos >= TimerLogPosition(0)) {
    auto u = timerlog_->Read(pos);
    if (!u.ok()) {
      walk_status = u.status();
      break;
    }
    if (u->slot_tick != tick || u->prev_pos >= pos) {
      walk_status = absl::DataLossError(absl::StrCat("timerlog: broken chain at ", pos.value()));
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
  run->reserve(chain.size());
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (UnitKind(it->second.flags) == kUnitRoll) {
      rolls->push_back(*it);
    } else {
      run->push_back(ScheduledUnit{it->first, it->second, tick});
    }
  }
  std::sort(run->begin(), run->end(), FineScheduler::RunOrder);
}

absl::Status TimerStoreImpl::ContinueRollsLocked(
    int64_t tick, const std::vector<std::pair<TimerLogPosition, TimerUnit>>& rolls) {
  for (const auto& [upos, unit] : rolls) {
    ScheduledUnit su{upos, unit, tick};
    if (SupersededLocked(unit)) {  // moved by retention: the copy carries the message on
      if (SeededLocked(su)) pending_by_delay_.Sub(unit.slot_tick);
      continue;
    }
    if (recalled_.contains(unit.physical_offset)) {
      SettleSeededLocked(su, /*recalled=*/true, /*stale_roll=*/false);
      InflightLocked(tick).outstanding++;
      FinishUnitLocked(su, /*pending_decrement=*/false);
      continue;
    }
    if (rolled_from_.contains(upos)) {  // continuation written before a crash
      SettleSeededLocked(su, /*recalled=*/false, /*stale_roll=*/true);
      continue;
    }
    SettleSeededLocked(su, /*recalled=*/false, /*stale_roll=*/false);
    TimerUnit next = unit;
    next.ref = upos.value();
    next.roll_count = unit.roll_count + 1;
    TOKIMQ_RETURN_IF_ERROR(LinkUnitLocked(next).status());
    metrics_.rolled.Add(1);
  }
  return absl::OkStatus();
}

void TimerStoreImpl::HandOverRunLocked(int64_t tick, std::vector<ScheduledUnit> run) {
  // The sets are empty in steady state (they fill after recovery or with recalls).
  const bool check = !handed_early_.empty() || !recalled_.empty() || !delivered_phys_.empty() ||
                     moves_.frontier > PhysicalOffset(0);
  InflightTick& inflight = InflightLocked(tick);  // a map entry: stays put while counted
  size_t kept = 0;
  for (size_t i = 0; i < run.size(); ++i) {
    const ScheduledUnit& su = run[i];
    // Linked after its own tick was walked: LinkUnitLocked already handed it over.
    if (check && handed_early_.erase(su.pos) > 0) continue;
    if (check && SupersededLocked(su.unit)) {  // moved by retention (its pin went then)
      if (SeededLocked(su)) pending_by_delay_.Sub(su.unit.slot_tick);
      continue;
    }
    if (seed_end_pos_ >= TimerLogPosition(0)) {
      SettleSeededLocked(su, recalled_.contains(su.unit.physical_offset), /*stale_roll=*/false);
    }
    inflight.outstanding++;
    if (check && recalled_.contains(su.unit.physical_offset)) {
      FinishUnitLocked(su, /*pending_decrement=*/false);
    } else if (check && delivered_phys_.contains(su.unit.physical_offset)) {
      FinishUnitLocked(su, /*pending_decrement=*/true);  // delivered before the crash
    } else {
      inflight.min_phys = std::min(inflight.min_phys, su.unit.physical_offset);
      if (kept != i) run[kept] = std::move(run[i]);
      ++kept;
    }
  }
  run.resize(kept);
  AddRunLocked(std::move(run));
  inflight.outstanding--;  // the walk's own count
}

void TimerStoreImpl::FinishWalkStepLocked(size_t progressed) {
  MaybeCompleteTicksLocked();
  if (seed_end_pos_ >= TimerLogPosition(0) && next_walk_tick_ >= seed_until_tick_) {
    // Every seeded slot walked: all counts are at deliver ticks now.
    seed_end_pos_ = TimerLogPosition::kNone();
    seed_recalled_.clear();
  }
  int64_t read_tick = ReadTickLocked();
  if (dedup_until_tick_ >= 0 && read_tick > dedup_until_tick_) {
    delivered_phys_.clear();
    rolled_from_.clear();
    dedup_until_tick_ = -1;
  }
  if (progressed > 0 && !recalled_.empty() && recalled_.size() % 1024 == 0) {
    const int64_t p = options_.precision_ms;
    absl::erase_if(recalled_,
                   [&](const auto& kv) { return kv.second + kRecallGraceTicksMs < read_tick * p; });
  }
}

}  // namespace tokimq
