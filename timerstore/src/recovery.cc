// Recovery: checkpoint + TimerLog tail -> wheel, counters, dedup sets; CommitLog tail scan.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "timer_store_impl.h"

namespace tokimq {

absl::Status TimerStoreImpl::RelinkForRecovery(TimerLogPosition pos, const TimerUnit& u,
                                               int64_t read_tick) {
  if (u.flags == kUnitDelete || u.slot_tick < read_tick) return absl::OkStatus();
  TimerSlot s = wheel_->Get(u.slot_tick);
  if (s.count > 0 && s.last_pos >= pos) return absl::OkStatus();  // wheel file already has it
  wheel_->Link(u.slot_tick, pos);
  return absl::OkStatus();
}

absl::Status TimerStoreImpl::RecoverMoves() {
  auto loaded = LoadMoveState(fs_, options_.dir + "/moves");
  if (absl::IsNotFound(loaded.status())) return absl::OkStatus();
  TOKIMQ_RETURN_IF_ERROR(loaded.status());
  moves_ = *std::move(loaded);
  if (moves_.started_epoch > moves_.committed_epoch && !moves_.Committed(moves_.started_epoch)) {
    const bool listed =
        std::any_of(moves_.abandoned.begin(), moves_.abandoned.end(),
                    [&](const AbandonedMove& a) { return a.epoch == moves_.started_epoch; });
    if (!listed) {
      // A move cut short by the crash: its copies (if any reached the CommitLog) never count.
      moves_.abandoned.push_back({moves_.started_epoch, store_->commit_log()->MaxOffset()});
      metrics_.move_aborts.Add(1);
      TOKIMQ_RETURN_IF_ERROR(StoreMoveState(fs_, options_.dir + "/moves", moves_));
      TOKIMQ_LOG_INFO("timerstore: retention move {} was interrupted; its copies are ignored",
                      moves_.started_epoch);
    }
  }
  return absl::OkStatus();
}

absl::Status TimerStoreImpl::LoadCheckpointForRecovery(RecoveryScan* r) {
  const std::string& dir = options_.dir;
  TOKIMQ_RETURN_IF_ERROR(fs_->CreateDirs(dir));
  TimerCheckpointData& ckpt = r->ckpt;
  auto loaded = LoadTimerCheckpoint(fs_, dir + "/checkpoint");
  if (loaded.ok()) {
    r->had_checkpoint = true;
    ckpt = *loaded;
    if (ckpt.precision_ms != options_.precision_ms) {
      return absl::FailedPreconditionError(
          absl::StrCat("timerstore: data in ", dir, " uses precision ", ckpt.precision_ms,
                       " ms, options say ", options_.precision_ms));
    }
    return absl::OkStatus();
  }
  if (!absl::IsNotFound(loaded.status())) return loaded.status();
  ckpt.precision_ms = options_.precision_ms;
  ckpt.read_tick = TickOf(clock_->NowMs());
  ckpt.enqueue_queue_offset = store_->MinQueueOffset(kTimerTopic, 0);
  // No checkpoint: whatever TimerLog/wheel exist are unaccounted for. Start them empty and
  // rebuild from the timer topic; the whole CommitLog is scanned for delivered copies.
  ckpt.commitlog_scan_from = store_->commit_log()->MinOffset();
  if (fs_->Exists(dir + "/timerwheel")) TOKIMQ_RETURN_IF_ERROR(fs_->Remove(dir + "/timerwheel"));
  if (fs_->Exists(dir + "/timerlog")) {
    TOKIMQ_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDir(dir + "/timerlog"));
    for (const std::string& n : names) {
      TOKIMQ_RETURN_IF_ERROR(fs_->Remove(dir + "/timerlog/" + n));
    }
  }
  return absl::OkStatus();
}

absl::Status TimerStoreImpl::OpenTimerLogAndWheel(RecoveryScan* r) {
  const std::string& dir = options_.dir;
  const TimerCheckpointData& ckpt = r->ckpt;
  r->scan_from = std::min(ckpt.timerlog_scan_from, ckpt.timerlog_flush_pos);
  TOKIMQ_ASSIGN_OR_RETURN(timerlog_, TimerLog::Open(fs_, dir + "/timerlog",
                                                    options_.timerlog_segment_size, r->scan_from));
  if (timerlog_->WritePos() < ckpt.timerlog_flush_pos) {
    return absl::DataLossError(absl::StrCat(
        "timerstore: TimerLog ends at ", timerlog_->WritePos().value(),
        " before the checkpointed flush position ", ckpt.timerlog_flush_pos.value()));
  }
  TOKIMQ_ASSIGN_OR_RETURN(wheel_, TimerWheel::Open(fs_, dir + "/timerwheel", options_.precision_ms,
                                                   static_cast<uint64_t>(2 * slots_total_)));
  r->read_tick = ckpt.read_tick;
  r->end = timerlog_->WritePos();
  if (wheel_->corrupt_slots() > 0) {
    // Rebuild every live slot from the whole TimerLog (rare: torn wheel write).
    wheel_->Reset();
    for (TimerLogPosition pos = timerlog_->MinPos(); pos < r->scan_from; pos += kTimerUnitSize) {
      TOKIMQ_ASSIGN_OR_RETURN(TimerUnit u, timerlog_->Read(pos));
      TOKIMQ_RETURN_IF_ERROR(RelinkForRecovery(pos, u, r->read_tick));
    }
  }
  return absl::OkStatus();
}

absl::Status TimerStoreImpl::ReplayTimerLogTail(RecoveryScan* r) {
  const TimerCheckpointData& ckpt = r->ckpt;
  const int64_t read_tick = r->read_tick;
  for (TimerLogPosition pos = r->scan_from; pos < r->end; pos += kTimerUnitSize) {
    TOKIMQ_ASSIGN_OR_RETURN(TimerUnit u, timerlog_->Read(pos));
    TOKIMQ_RETURN_IF_ERROR(RelinkForRecovery(pos, u, read_tick));
    if (UnitKind(u.flags) == kUnitNormal && u.slot_tick >= read_tick &&
        TickOf(u.deliver_ms) < u.slot_tick) {
      // Linked after its own tick was walked (and handed to the FineScheduler then): walk its
      // slot at once, not one tick before the slot begins, so it is not late after a restart.
      eager_walk_until_ = std::max(eager_walk_until_, u.slot_tick + 1);
    }
    if (u.ref >= 0 && u.flags != kUnitDelete) {
      rolled_from_.insert(TimerLogPosition(u.ref));
      // Needed until the read tick passes the roll unit's own slot (walked before the crash),
      // not the continuation's (up to a window later).
      auto src = timerlog_->Read(TimerLogPosition(u.ref));
      r->max_tail_tick = std::max(r->max_tail_tick, src.ok() ? src->slot_tick : u.slot_tick);
    }
    if (pos < ckpt.timerlog_flush_pos) continue;  // already in the checkpointed counters
    if (u.flags == kUnitDelete) {
      recalled_[PhysicalOffset(u.ref)] = u.deliver_ms;
      --r->pending;
      last_enqueued_physical_offset_ = std::max(last_enqueued_physical_offset_, u.physical_offset);
    } else if (u.ref < 0) {
      if ((u.flags & kUnitMovedCopy) == 0) ++r->pending;  // a copy's message is counted already
      if (u.physical_offset >= moves_.frontier) pins_[PinBucketOf(u.physical_offset)]++;
      last_enqueued_physical_offset_ = std::max(last_enqueued_physical_offset_, u.physical_offset);
    }
  }
  return absl::OkStatus();
}

int64_t TimerStoreImpl::DeliveredCopySlot(const Message& m, PhysicalOffset phys,
                                          const RecoveryScan& r) {
  // Needed until the read tick passes the slot its unit was walked in: the unit named by
  // TIMER_UNIT_POS when the TimerLog still has it; otherwise (lost with an unsynced
  // TimerLog tail) re-enqueue links it at max(its tick, read_tick) — two ticks of margin
  // for a unit handed over early (LinkUnitLocked).
  auto up = m.properties.find(prop::kTimerUnitPos);
  int64_t upos = -1;
  if (up != m.properties.end() && ParseInt64(up->second, &upos) && upos >= 0 &&
      TimerLogPosition(upos) < r.end) {
    auto unit = timerlog_->Read(TimerLogPosition(upos));
    if (unit.ok() && unit->physical_offset == phys) return unit->slot_tick;
  }
  auto d = m.properties.find(prop::kDeliverMs);
  int64_t dms = 0;
  if (d != m.properties.end() && ParseInt64(d->second, &dms)) {
    return std::max(TickOf(dms), r.read_tick) + 2;
  }
  return r.read_tick + slots_total_;  // no deliver time: the most conservative bound
}

void TimerStoreImpl::ScanDeliveredCopies(RecoveryScan* r) {
  // Delivered copies already in the CommitLog (moves done before the crash).
  CommitLog* log = store_->commit_log();
  const PhysicalOffset cl_end = log->MaxOffset();
  PhysicalOffset at = std::max(r->ckpt.commitlog_scan_from, log->MinOffset());
  while (at < cl_end) {
    auto next = log->ReadNext(at);
    if (!next.ok()) {
      TOKIMQ_LOG_WARN("timerstore: CommitLog scan stopped at {}: {}", at,
                      next.status().ToString());
      break;
    }
    const Message& m = next->first;
    auto it = m.properties.find(kTimerSourceOffset);
    int64_t phys = 0;
    if (m.topic != kTimerTopic && it != m.properties.end() && ParseInt64(it->second, &phys)) {
      delivered_phys_.insert(PhysicalOffset(phys));
      r->max_tail_tick =
          std::max(r->max_tail_tick, DeliveredCopySlot(m, PhysicalOffset(phys), *r));
    }
    ++r->scanned;
    if (next->second <= at) break;
    at = next->second;
  }
  if (!delivered_phys_.empty() || !rolled_from_.empty()) {
    // Every move or roll done before the crash was of a slot walked before it; once the read
    // tick passes the last of those slots, no unit they concern is walked again.
    dedup_until_tick_ = std::max(r->max_tail_tick, r->read_tick);
    // What the sets say was read from these ranges only: checkpoints keep them in scope until
    // the read tick passes dedup_until_tick_ (see Checkpoint()).
    dedup_commitlog_from_ = std::max(r->ckpt.commitlog_scan_from, log->MinOffset());
    dedup_timerlog_from_ = r->scan_from;
  }
  // A follower (follower.cc) reads the CommitLog for the leader's copies from here on.
  follow_scan_pos_ = cl_end;
  // The CommitLog may have lost its tail: nothing at or past its end was ever enqueued.
  if (last_enqueued_physical_offset_ >= cl_end) last_enqueued_physical_offset_ = cl_end - 1;
}

void TimerStoreImpl::RegisterWithStore() {
  // The MessageStore may outlive us: the destructor removes the provider, and (for stores that
  // cannot remove one) clears the shared cell it goes through.
  pin_cell_ = std::make_shared<PinCell>();
  pin_cell_->owner = this;
  pin_id_ = store_->AddRemovablePinProvider([cell = pin_cell_] {
    std::lock_guard<std::mutex> cl(cell->mu);
    if (cell->owner == nullptr) return PhysicalOffset(std::numeric_limits<int64_t>::max());
    std::lock_guard<std::mutex> l(cell->owner->mu_);
    return cell->owner->PinLocked();
  });
  hook_id_ = store_->AddRetentionHook([cell = pin_cell_](PhysicalOffset expired_end) {
    std::lock_guard<std::mutex> cl(cell->mu);
    if (cell->owner == nullptr) return absl::OkStatus();
    absl::Status s = cell->owner->MoveSurvivors(expired_end);
    cell->owner->RefreshRetentionGauges(expired_end);
    return s;
  });
}

absl::Status TimerStoreImpl::Recover() {
  RecoveryScan r;
  TOKIMQ_RETURN_IF_ERROR(LoadCheckpointForRecovery(&r));
  TOKIMQ_RETURN_IF_ERROR(OpenTimerLogAndWheel(&r));
  TOKIMQ_RETURN_IF_ERROR(RecoverMoves());
  const TimerCheckpointData& ckpt = r.ckpt;
  for (const RecalledEntry& e : ckpt.recalled) recalled_[e.physical_offset] = e.deliver_ms;
  pins_ = ckpt.pins;
  r.pending = ckpt.pending;
  last_enqueued_physical_offset_ = ckpt.last_enqueued_physical_offset;
  TOKIMQ_RETURN_IF_ERROR(ReplayTimerLogTail(&r));
  ScanDeliveredCopies(&r);
  const QueueOffset qmin = store_->MinQueueOffset(kTimerTopic, 0);
  const QueueOffset qmax = store_->MaxQueueOffset(kTimerTopic, 0);
  enqueue_offset_ = std::clamp(ckpt.enqueue_queue_offset, qmin, std::max(qmin, qmax));
  enqueue_read_offset_ = enqueue_offset_;
  timer_max_queue_offset_ = qmax;
  next_walk_tick_ = r.read_tick;
  metrics_.pending.Set(std::max<int64_t>(0, r.pending));
  SeedPendingByDelayLocked(r.read_tick);
  RefreshGaugesLocked(clock_->NowMs());
  // Re-enqueue what the timer topic has beyond the TimerLog now, so recalls written before the
  // crash are known before the first Recall or delivery.
  while (true) {
    TOKIMQ_ASSIGN_OR_RETURN(size_t got, EnqueueGetStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t put, EnqueuePutStep());
    if (got + put == 0) break;
  }
  TOKIMQ_LOG_INFO(
      "timerstore: recovered read_tick={} timerlog_end={} pending={} dedup: {} delivered, {} "
      "rolled; scanned {} CommitLog records",
      r.read_tick, r.end, r.pending, delivered_phys_.size(), rolled_from_.size(), r.scanned);
  if (!r.had_checkpoint) TOKIMQ_RETURN_IF_ERROR(Checkpoint());
  RegisterWithStore();
  return absl::OkStatus();
}

}  // namespace tokimq
