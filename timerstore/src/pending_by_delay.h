// PendingByDelay: the timer's pending messages counted by deliver tick, so the gauge of pending
// messages by remaining delay (TimerMetrics::pending_by_bucket) can be computed exactly at any
// moment, not estimated from wheel slots.
//
// Owned by TimerStoreImpl and guarded by its mu_ (no locking here). Every change to the
// `pending` gauge is paired with one Add/Sub here at the message's deliver tick, so the total
// equals `pending`. In memory only: one entry per distinct pending deliver tick (a few dozen
// bytes each; 7,200 for two hours of delays at 1 s precision), rebuilt at recovery from the
// wheel's slot counts (see TimerStoreImpl::SeedPendingByDelayLocked).
#pragma once

#include <cstdint>

#include "absl/container/btree_map.h"

namespace tokimq {

class PendingByDelay {
 public:
  // Upper bounds (ms of remaining delay, inclusive) of the first eight buckets; the ninth holds
  // the rest. Matches TimerMetrics::pending_by_bucket and the Stats response.
  static constexpr int kBuckets = 9;
  static constexpr int64_t kBoundsMs[kBuckets - 1] = {
      5'000, 60'000, 300'000, 900'000, 3'600'000, 14'400'000, 28'800'000, 86'400'000};

  // n more (Add) or fewer (Sub) pending messages due in `tick`. A count never goes below 0:
  // Sub of an absent or smaller count removes what is there and counts an underflow.
  void Add(int64_t tick, int64_t n = 1);
  void Sub(int64_t tick, int64_t n = 1);
  void Clear();

  // Counts by remaining delay at `now_ms`: a message due in tick t has t * precision_ms - now_ms
  // ms left (the start of its tick; due or overdue ones fall in the first bucket). Cost: one
  // step per distinct tick within the largest bound, plus a sum.
  void Buckets(int64_t now_ms, int64_t precision_ms, int64_t out[kBuckets]) const;

  int64_t total() const { return total_; }
  int64_t ticks() const { return static_cast<int64_t>(by_tick_.size()); }
  int64_t underflows() const { return underflows_; }

 private:
  absl::btree_map<int64_t, int64_t> by_tick_;  // tick -> pending count (> 0)
  int64_t total_ = 0;
  int64_t underflows_ = 0;
};

}  // namespace tokimq
