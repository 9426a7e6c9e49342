// Retention mover: before retention deletes CommitLog segments, the pending timer messages
// whose records lie there are copied to the CommitLog head (same message id, body, properties
// and deliver time) and the segments are given up. docs/timerstore.md "Retention moves" has
// the protocol; docs/formats/timermoves.md the state file.
//
// One move, in order (a crash between any two steps is safe, see the doc):
//   1. plan: find the survivors below the expired end in the chains of the slots not walked
//      yet (the TimerLog, not the segments), and the end the move may reach;
//   2. begin: epoch := started_epoch + 1, stored in <dir>/moves;
//   3. copy: one timer-topic record per survivor with TIMER_MOVED_FROM / TIMER_MOVE_EPOCH /
//      TIMER_ORIGIN_OFFSET; enqueue links them as ordinary units (flag kUnitMovedCopy);
//   4. sync: Checkpoint() (copies fsynced, TimerLog, wheel, checkpoint);
//   5. commit (under mu_): unless a survivor was walked meanwhile, committed_epoch := epoch
//      and frontier := end, stored in <dir>/moves. From then on units below the frontier are
//      superseded (skipped when walked) and the copies count; else the epoch is abandoned.
// MessageStore::DeleteExpired then deletes the segments below the pins.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "commitlog/record.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/parse_int.h"
#include "common/status.h"
#include "prop_keys.h"
#include "timer_store_impl.h"

namespace tokimq {
namespace {

constexpr size_t kCopyBatch = 512;  // copies per PutBatch
// A normal unit due within this many ticks of the walk is not moved now (it is about to be
// delivered from where it is); the next pass takes its segment.
constexpr int64_t kDueMarginTicks = 2;

}  // namespace

absl::StatusOr<std::vector<TimerStoreImpl::MoveCandidate>> TimerStoreImpl::FindCandidates(
    const std::vector<std::pair<int64_t, TimerLogPosition>>& slots, PhysicalOffset end,
    int64_t* read) const {
  std::vector<MoveCandidate> out;
  PhysicalOffset frontier;
  {
    std::lock_guard<std::mutex> l(mu_);
    frontier = moves_.frontier;
  }
  for (const auto& [tick, last_pos] : slots) {
    for (TimerLogPosition pos = last_pos; pos >= TimerLogPosition(0);) {
      TOKIMQ_ASSIGN_OR_RETURN(TimerUnit u, timerlog_->Read(pos));
      ++*read;
      if (u.slot_tick != tick || u.prev_pos >= pos) {
        return absl::DataLossError(absl::StrCat("timerlog: broken chain at ", pos.value()));
      }
      if (u.physical_offset >= frontier && u.physical_offset < end) out.push_back({pos, u});
      pos = u.prev_pos;
    }
  }
  return out;
}

PhysicalOffset TimerStoreImpl::ChooseSurvivorsLocked(std::vector<MoveCandidate> candidates,
                                                     PhysicalOffset end,
                                                     QueueOffset timer_queue_end,
                                                     std::vector<MoveCandidate>* survivors,
                                                     std::vector<MoveCandidate>* seen) const {
  // Units handed to the FineScheduler (in flight) stay where they are until delivered.
  for (const auto& [tick, t] : inflight_) end = std::min(end, t.min_phys);
  // Records not yet in the TimerLog are unknown here (records put after `timer_queue_end`
  // was read lie at the CommitLog head, above any expired end).
  if (enqueue_offset_ < timer_queue_end) {
    end = std::min(end, last_enqueued_physical_offset_ + 1);
  }
  for (const MoveCandidate& c : candidates) {
    const bool normal = UnitKind(c.unit.flags) == kUnitNormal;
    if (handed_early_.contains(c.pos) || delivered_phys_.contains(c.unit.physical_offset) ||
        (normal && c.unit.slot_tick < next_walk_tick_ + kDueMarginTicks)) {
      end = std::min(end, c.unit.physical_offset);
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const MoveCandidate& a, const MoveCandidate& b) {
              return a.unit.physical_offset < b.unit.physical_offset ||
                     (a.unit.physical_offset == b.unit.physical_offset && a.pos > b.pos);
            });
  // A roll unit and its continuation (a crash between them) name the same record: one copy.
  for (size_t i = 0; i < candidates.size(); ++i) {
    const MoveCandidate& c = candidates[i];
    if (c.unit.physical_offset >= end) break;
    if (i > 0 && candidates[i - 1].unit.physical_offset == c.unit.physical_offset) continue;
    seen->push_back(c);
    if (!recalled_.contains(c.unit.physical_offset)) survivors->push_back(c);
  }
  return end;
}

absl::Status TimerStoreImpl::WriteCopies(const std::vector<MoveCandidate>& survivors,
                                         uint64_t epoch, const MoveState& state, int64_t* copied,
                                         int64_t* copied_bytes) {
  const std::string epoch_text = std::to_string(epoch);
  for (size_t from = 0; from < survivors.size(); from += kCopyBatch) {
    const size_t n = std::min(kCopyBatch, survivors.size() - from);
    std::vector<ReadRequest> reqs;
    reqs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const TimerUnit& u = survivors[from + i].unit;
      reqs.push_back({u.physical_offset, u.msg_size});
    }
    std::vector<Message> copies;
    copies.reserve(n);
    absl::Status read_error;
    store_->VisitMany(reqs, [&](size_t i, const absl::StatusOr<record::RecordView>& read) {
      if (!read.ok()) {
        if (read_error.ok()) read_error = read.status();
        return;
      }
      const record::RecordView& v = *read;
      const TimerUnit& u = survivors[from + i].unit;
      std::string_view s;
      int64_t deliver = 0, old_epoch = 0;
      if (v.topic != kTimerTopic || !v.FindProperty(prop::kDeliverMs, &s) ||
          !ParseInt64(s, &deliver) || deliver != u.deliver_ms) {
        return;  // not the unit's record (lost tail, space reused): nothing to move
      }
      if (v.FindProperty(kTimerMoveEpoch, &s) && ParseInt64(s, &old_epoch) &&
          !state.Committed(static_cast<uint64_t>(old_epoch))) {
        return;  // a copy of a move that never committed: never delivered, not moved
      }
      Message m;
      record::MessageFromView(v, &m);
      m.queue_offset = QueueOffset::kNone();
      m.physical_offset = PhysicalOffset::kNone();
      m.store_ms = 0;
      m.properties.try_emplace(kTimerOriginOffset, std::to_string(u.physical_offset.value()));
      m.properties.insert_or_assign(kTimerMovedFrom, std::to_string(u.physical_offset.value()));
      m.properties.insert_or_assign(kTimerMoveEpoch, epoch_text);
      copies.push_back(std::move(m));
    });
    // A record we cannot read now (I/O) cannot be moved: the move fails, nothing commits.
    TOKIMQ_RETURN_IF_ERROR(read_error);
    if (copies.empty()) continue;
    TOKIMQ_ASSIGN_OR_RETURN(std::vector<PutResult> puts, store_->PutBatch(std::move(copies)));
    for (const PutResult& p : puts) {
      ++*copied;
      *copied_bytes += p.size;
    }
    NoteTimerPuts(puts.back().queue_offset, INT64_MIN);  // wakes the enqueue thread
  }
  return absl::OkStatus();
}

absl::Status TimerStoreImpl::AbandonMoveLocked(uint64_t epoch) {
  moves_.abandoned.push_back({epoch, store_->commit_log()->MaxOffset()});
  metrics_.move_aborts.Add(1);
  return StoreMoveState(fs_, options_.dir + "/moves", moves_);
}

std::vector<std::pair<int64_t, TimerLogPosition>> TimerStoreImpl::LiveSlotsLocked() const {
  std::vector<std::pair<int64_t, TimerLogPosition>> slots;
  const int64_t limit = next_walk_tick_ + slots_total_ + 1;
  for (int64_t t = wheel_->NextLiveTick(next_walk_tick_, limit); t < limit;
       t = wheel_->NextLiveTick(t + 1, limit)) {
    const TimerSlot s = wheel_->Get(t);
    if (s.count > 0 && s.last_pos >= TimerLogPosition(0)) slots.emplace_back(t, s.last_pos);
  }
  return slots;
}

absl::StatusOr<bool> TimerStoreImpl::CommitMoveLocked(uint64_t epoch, PhysicalOffset end,
                                                      const std::vector<MoveCandidate>& survivors,
                                                      const std::vector<MoveCandidate>& seen) {
  // A survivor whose slot was walked meanwhile may be delivered from where it is: then its
  // copy must never count. (Roll units are fine: their continuation is superseded too.)
  bool raced = false;
  for (const auto& [tick, t] : inflight_) raced = raced || t.min_phys < end;
  for (const MoveCandidate& c : survivors) {
    raced = raced || (UnitKind(c.unit.flags) == kUnitNormal && c.unit.slot_tick < next_walk_tick_);
  }
  if (raced) {
    TOKIMQ_LOG_INFO("timerstore: retention move {} abandoned (a message fell due meanwhile)",
                    epoch);
    if (epoch != 0) TOKIMQ_RETURN_IF_ERROR(AbandonMoveLocked(epoch));
    return false;
  }
  MoveState next = moves_;
  if (epoch != 0) next.committed_epoch = epoch;
  next.frontier = end;
  std::erase_if(next.abandoned, [end](const AbandonedMove& a) { return a.copies_end <= end; });
  absl::Status stored = StoreMoveState(fs_, options_.dir + "/moves", next);
  if (!stored.ok()) {
    if (epoch != 0) (void)AbandonMoveLocked(epoch);
    return stored;
  }
  moves_ = std::move(next);
  for (const MoveCandidate& c : seen) {
    auto p = pins_.find(PinBucketOf(c.unit.physical_offset));
    if (p != pins_.end() && --p->second <= 0) pins_.erase(p);
  }
  return true;
}

absl::Status TimerStoreImpl::MoveSurvivors(PhysicalOffset expired_end) {
  std::lock_guard<std::mutex> ml(move_mu_);
  last_expired_end_.store(expired_end.value(), std::memory_order_release);
  const auto started = RealTimeNow();
  std::vector<std::pair<int64_t, TimerLogPosition>> slots;  // (tick, last_pos) of every live slot
  {
    std::lock_guard<std::mutex> l(mu_);
    if (expired_end <= moves_.frontier) return absl::OkStatus();
    slots = LiveSlotsLocked();
  }
  int64_t units_read = 0;
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<MoveCandidate> candidates,
                          FindCandidates(slots, expired_end, &units_read));
  const int64_t walk_us = RealTimeMicrosSince(started);
  std::vector<MoveCandidate> survivors, seen;
  const QueueOffset timer_queue_end = store_->MaxQueueOffset(kTimerTopic, 0);  // not under mu_
  PhysicalOffset end;
  uint64_t epoch = 0;
  MoveState state;
  {
    std::lock_guard<std::mutex> l(mu_);
    end = ChooseSurvivorsLocked(std::move(candidates), expired_end, timer_queue_end, &survivors,
                                &seen);
    if (end <= moves_.frontier) return absl::OkStatus();
    if (seen.empty()) {
      // Nothing pending below `end`: nothing to copy or supersede, so no write either. The
      // frontier still moves (in memory; the next commit stores it) so that a pin bucket
      // reaching below `end` pins from `end` only.
      moves_.frontier = end;
      return absl::OkStatus();
    }
    if (!survivors.empty()) {
      epoch = ++moves_.started_epoch;
      TOKIMQ_RETURN_IF_ERROR(StoreMoveState(fs_, options_.dir + "/moves", moves_));
    }
    state = moves_;
  }
  auto step = [this](int n) {
    return options_.TEST_move_step ? options_.TEST_move_step(n) : absl::OkStatus();
  };
  int64_t copied = 0, copied_bytes = 0;
  absl::Status s = step(1);
  if (s.ok() && epoch != 0) s = WriteCopies(survivors, epoch, state, &copied, &copied_bytes);
  if (s.ok()) s = step(2);
  if (s.ok()) s = Checkpoint();  // copies durable; every unit below `end` durable too
  if (s.ok()) s = step(3);
  std::lock_guard<std::mutex> l(mu_);
  if (!s.ok()) {
    if (epoch != 0) (void)AbandonMoveLocked(epoch);
    return s;
  }
  TOKIMQ_ASSIGN_OR_RETURN(bool committed, CommitMoveLocked(epoch, end, survivors, seen));
  if (!committed) return absl::OkStatus();
  metrics_.moved.Add(copied);
  metrics_.moved_bytes.Add(copied_bytes);
  const int64_t us = RealTimeMicrosSince(started);
  if (copied > 0) {
    TOKIMQ_LOG_INFO(
        "timerstore: retention moved {} pending message(s) ({} bytes) from below {}; found them "
        "reading {} TimerLog units of {} slots in {} us; move {} us in all",
        copied, copied_bytes, end.value(), units_read, slots.size(), walk_us, us);
  }
  return step(4);
}

void TimerStoreImpl::DropUncommittedCopiesLocked(std::vector<LoadedCopy>* loaded) {
  if (moves_.committed_epoch == 0 && moves_.started_epoch == 0) return;  // no move ever
  size_t kept = 0;
  for (size_t i = 0; i < loaded->size(); ++i) {
    LoadedCopy& c = (*loaded)[i];
    if (c.move_epoch != 0 && !moves_.Committed(c.move_epoch)) {
      // A copy of a move that never committed: the message is delivered from where it was.
      FinishUnitLocked(c.su, /*pending_decrement=*/false);
      continue;
    }
    // Recalled by its first handle. The recall could not check that handle's message id (the
    // origin record is gone), so its deliver time must match the copy's: a handle naming the
    // right offset with another time cancels nothing.
    if (auto r = c.origin >= PhysicalOffset(0) ? recalled_.find(c.origin) : recalled_.end();
        r != recalled_.end() && r->second == c.su.unit.deliver_ms) {
      FinishUnitLocked(c.su, /*pending_decrement=*/false);
      continue;
    }
    if (kept != i) (*loaded)[kept] = std::move(c);
    ++kept;
  }
  loaded->resize(kept);
}

void TimerStoreImpl::RefreshRetentionGauges(PhysicalOffset expired_end) {
  PhysicalOffset pin;
  {
    std::lock_guard<std::mutex> l(mu_);
    pin = PinLocked();
  }
  CommitLog* log = store_->commit_log();
  const PhysicalOffset min = log->MinOffset();
  const PhysicalOffset kept_from = std::max(pin, min);
  if (expired_end != PhysicalOffset::kNone()) {
    metrics_.pinned_bytes.Set(expired_end > kept_from ? expired_end - kept_from : 0);
  }
  int64_t age = 0;
  if (pin != PhysicalOffset(std::numeric_limits<int64_t>::max())) {
    auto ms = log->SegmentStoreMs(std::max(pin, min));
    if (ms.ok()) age = std::max<int64_t>(0, clock_->NowMs() - *ms);
  }
  metrics_.oldest_pending_segment_age_ms.Set(age);
}

}  // namespace tokimq
