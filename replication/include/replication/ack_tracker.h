// AckTracker: the leader's side of sync replication (issue 20, docs/replication.md): a write is
// answered only once a follower holds its bytes (RocketMQ's SYNC_MASTER).
//
// A follower acknowledges by pulling: the `from` offset of each pull is the end of what it has
// appended (RocketMQ HA reports its offset the same way). One acknowledgement answers every
// wait below it, so waits are grouped like the CommitLog's group commit: the cost is one
// follower round trip per batch of writes, not per write.
//
// Owned by the broker, one per leader term. Thread-safety: every method may be called from any
// thread; callbacks run on the calling thread of OnFollowerAck / Fail / ExpireWaits /
// WhenReplicated, outside the internal lock, and must be short (hand the answer on). Time:
// deadlines are read from the injected Clock; ExpireWaits is driven by the owner (a timer
// thread in the broker, the test on a ManualClock). Nothing is persisted.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "common/clock.h"
#include "common/offsets.h"

namespace tokimq::replication {

class AckTracker {
 public:
  explicit AckTracker(Clock* clock) : clock_(clock) {}

  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  // done(OK) once a follower acknowledged every byte below `end` (the CommitLog end to cover);
  // done(kUnavailable) when `timeout_ms` passes first (checked by ExpireWaits) or the tracker
  // was failed (this replica lost its term: the error given to Fail). Answered inline when
  // already known.
  void WhenReplicated(PhysicalOffset end, int64_t timeout_ms, Done done);
  // A follower's acknowledged end offset. Answers every wait with end <= offset. Offsets only
  // move forward (an older report is ignored).
  void OnFollowerAck(PhysicalOffset offset);
  // Fails every wait with `error` and every later one until Reset (the leader was deposed).
  void Fail(absl::Status error);
  // Accepts waits again, with `acked` as the acknowledged offset (a new term as leader).
  void Reset(PhysicalOffset acked);
  // Fails the waits whose deadline has passed; returns how many.
  int ExpireWaits();

  PhysicalOffset acked_offset() const;
  size_t pending() const;

 private:
  struct Wait {
    int64_t deadline_ms;
    Done done;
  };

  Clock* clock_;
  mutable std::mutex mu_;
  PhysicalOffset acked_;                       // guarded by mu_
  absl::Status failed_;                        // guarded by mu_
  std::multimap<PhysicalOffset, Wait> waits_;  // by end offset; guarded by mu_
};

}  // namespace tokimq::replication
