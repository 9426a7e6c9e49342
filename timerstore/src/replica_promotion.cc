// AdoptReplicatedLog: a replica's timer store takes over the releases of the leader it copied
// (issue 20 item 3). The old leader's releases are delivered copies in the replicated
// CommitLog; they carry the source record's CommitLog offset (TIMER_SRC_OFFSET), which is the
// same on every replica because the log is copied byte for byte. Recovery already deduplicates
// by that key after a crash (ScanDeliveredCopies); a promotion is the same situation with
// another store's moves in the log, so it runs the same scan from the oldest record this store
// still has to deliver.
#include <algorithm>
#include <limits>

#include "common/logging.h"
#include "common/status.h"
#include "timer_store_impl.h"

namespace tokimq {

absl::Status TimerStoreImpl::AdoptReplicatedLog() {
  bool followed = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    followed = followed_;
  }
  // A store that followed knows everything below its follow position: only its lag is left
  // (follower.cc). One that did not (its broker never started following) scans from its pin.
  if (followed) return AdoptAfterFollowing();
  {
    std::lock_guard<std::mutex> l(mu_);
    CommitLog* log = store_->commit_log();
    // The replicated timer topic grew without this store: nothing past
    // last_enqueued_physical_offset_ is enqueued yet, so PinLocked counts it.
    timer_max_queue_offset_ =
        std::max(timer_max_queue_offset_, store_->MaxQueueOffset(kTimerTopic, 0));
    PhysicalOffset from = PinLocked();
    if (from == PhysicalOffset(std::numeric_limits<int64_t>::max())) from = log->MaxOffset();
    // A delivered copy lies past its source record, and every unit still to deliver (linked,
    // or to be enqueued below) has its record at or past the pin.
    const int64_t open_until = dedup_until_tick_;
    const PhysicalOffset open_cl_from = dedup_commitlog_from_;
    const TimerLogPosition open_tl_from = dedup_timerlog_from_;
    RecoveryScan r;
    r.ckpt.commitlog_scan_from = from;
    r.read_tick = ReadTickLocked();
    r.scan_from = timerlog_->WritePos();
    r.end = timerlog_->WritePos();
    r.max_tail_tick = open_until;
    const size_t before = delivered_phys_.size();
    ScanDeliveredCopies(&r);
    if (open_until >= 0) {  // recovery's own window was still open: keep its starts too
      dedup_commitlog_from_ = std::min(dedup_commitlog_from_, open_cl_from);
      dedup_timerlog_from_ = std::min(dedup_timerlog_from_, open_tl_from);
    }
    TOKIMQ_LOG_INFO(
        "timerstore: adopting the replicated log: scanned {} CommitLog records from offset {}, "
        "{} messages released by the previous leader",
        r.scanned, from, delivered_phys_.size() - before);
  }
  // Enqueue the replicated timer topic now, after the scan: a unit linked past its own tick is
  // handed over at once unless the scan knows it as delivered (LinkUnitLocked).
  while (true) {
    TOKIMQ_ASSIGN_OR_RETURN(size_t got, EnqueueGetStep());
    TOKIMQ_ASSIGN_OR_RETURN(size_t put, EnqueuePutStep());
    if (got + put == 0) break;
  }
  // The checkpoint keeps the scan start while the dedup window is open (Checkpoint()).
  return Checkpoint();
}

}  // namespace tokimq
