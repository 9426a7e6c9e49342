// Checkpoint: snapshot of the timer store state under mu_, then TimerLog fsync, wheel write,
// checkpoint file, in that order (docs/formats/timercheckpoint.md; DESIGN.md durability order).
#include <algorithm>

#include "common/status.h"
#include "timer_store_impl.h"

namespace tokimq {

absl::Status TimerStoreImpl::Checkpoint() {
  std::lock_guard<std::mutex> cpl(checkpoint_mu_);  // one checkpoint at a time
  // Delivered copies and delete markers first: the checkpoint may say "tick done" only once
  // its puts are durable.
  TOKIMQ_RETURN_IF_ERROR(store_->Flush());
  TimerCheckpointData c;
  TimerLogPosition timerlog_end;
  std::vector<TimerWheel::DirtyRun> wheel_runs;
  {
    std::lock_guard<std::mutex> l(mu_);
    c.precision_ms = options_.precision_ms;
    c.read_tick = ReadTickLocked();
    c.timerlog_flush_pos = timerlog_->WritePos();
    c.enqueue_queue_offset = enqueue_offset_;
    c.last_enqueued_physical_offset = last_enqueued_physical_offset_;
    c.pending = metrics_.pending.Value();
    for (const auto& [tick, t] : inflight_) c.pending += t.done_pending;
    // Where the next recovery scans for moves already done (delivered copies in the CommitLog,
    // roll continuations in the TimerLog): from the earliest start of any tick in flight (a
    // tick re-opened by a late link can start after a later tick's puts), and not past what
    // this store's own recovery still relies on (its dedup window, see dedup_until_tick_).
    c.commitlog_scan_from = store_->commit_log()->MaxOffset();
    c.timerlog_scan_from = c.timerlog_flush_pos;
    for (const auto& [tick, t] : inflight_) {
      c.commitlog_scan_from = std::min(c.commitlog_scan_from, t.commitlog_start);
      c.timerlog_scan_from = std::min(c.timerlog_scan_from, t.timerlog_start);
    }
    // A follower's copies whose unit is not due here yet exist nowhere else either.
    for (const auto& [src, copy] : copies_seen_) {
      c.commitlog_scan_from = std::min(c.commitlog_scan_from, copy.at);
    }
    if (dedup_until_tick_ >= 0) {
      c.commitlog_scan_from = std::min(c.commitlog_scan_from, dedup_commitlog_from_);
      c.timerlog_scan_from = std::min(c.timerlog_scan_from, dedup_timerlog_from_);
    }
    c.pins = pins_;
    c.recalled.reserve(recalled_.size());
    for (const auto& [phys, deliver] : recalled_) c.recalled.push_back({phys, deliver});
    std::sort(c.recalled.begin(), c.recalled.end(),
              [](const RecalledEntry& a, const RecalledEntry& b) {
                return a.physical_offset < b.physical_offset;
              });
    // Snapshot, under mu_ so no unit is linked in between: the TimerLog end and the wheel
    // slots as of this instant (they point only at units below that end). The fsyncs run
    // outside mu_, in the order TimerLog, then wheel, then checkpoint, so the wheel file never
    // points at a unit that is not durable.
    TOKIMQ_ASSIGN_OR_RETURN(timerlog_end, timerlog_->WriteOut());
    wheel_runs = wheel_->TakeDirtyRuns();
    RefreshGaugesLocked(clock_->NowMs());
  }
  absl::Status s = timerlog_->SyncTo(timerlog_end);
  if (s.ok()) s = wheel_->WriteRuns(wheel_runs);
  if (!s.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    wheel_->Redirty(wheel_runs);
    return s;
  }
  // An idle store: nothing but the read tick moved since the file was written. Not rewriting
  // it saves two fsyncs a second; a recovery from it walks the (empty) ticks since again, as
  // after a crash just before a checkpoint. The slack bounds that walk.
  const int64_t stored_tick = c.read_tick;
  c.read_tick = stored_read_tick_;
  std::string bytes = c.Encode();
  if (bytes == stored_checkpoint_ && stored_tick >= stored_read_tick_ &&
      (stored_tick - stored_read_tick_) * options_.precision_ms < kCheckpointReadTickSlackMs) {
    return absl::OkStatus();
  }
  c.read_tick = stored_tick;
  TOKIMQ_RETURN_IF_ERROR(StoreTimerCheckpoint(fs_, options_.dir + "/checkpoint", c));
  stored_checkpoint_ = c.Encode();
  stored_read_tick_ = stored_tick;
  return absl::OkStatus();
}

}  // namespace tokimq
