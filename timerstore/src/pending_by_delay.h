// PendingByDelay: the timer's pending messages counted by deliver tick, so the gauge of pending
// messages by remaining delay (TimerMetrics::pending_by_bucket) can be computed exactly at any
// moment, not estimated from wheel slots.
//
// Owned by TimerStoreImpl and guarded by its mu_ (no locking here). Every change to the
// `pending` gauge is paired with one Add/Sub here at the message's deliver tick, so the total
// equals `pending`. In memory only: one hash entry per distinct pending deliver tick (~16 bytes;
// 7,200 for two hours of delays at 1 s precision) and one ordered entry per 64-tick chunk;
// rebuilt at recovery from the wheel's slot counts (see TimerStoreImpl::SeedPendingByDelayLocked).
// Add/Sub cost one hash update and one update of the small chunk tree: they run under the
// timer's state lock once per enqueued and delivered message. Measured (-O2, 1M messages in
// random tick order, shared 2-core machine, noisy): 15-30 ns per op when they share a few
// ticks (a hot second), 60-100 ns over 7,200 ticks, 0.25-0.9 us over 604,800 (a week at 1 s:
// one cache miss in the hash, as the wheel's own slot update has); a btree keyed by tick, the
// first version, took 200-270 ns and 0.9-1.1 us.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"

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
  // step per chunk up to the largest bound (1,350 at 1 s precision) and 64 look-ups per chunk
  // that straddles a bucket bound.
  void Buckets(int64_t now_ms, int64_t precision_ms, int64_t out[kBuckets]) const;
  // Counts by due time at `now_ms` in out->size() buckets of bucket_ms each: bucket i holds the
  // messages whose deliver tick starts in [now + i * bucket_ms, now + (i + 1) * bucket_ms);
  // bucket 0 also those due or overdue (tick start before now). Returns the pending messages
  // beyond the last bucket. Cost: one step per chunk up to the last bucket's end, and 64
  // look-ups per chunk that straddles a bucket bound (a week of hours at 1 s precision: about
  // 9,500 chunks and 168 straddling ones at most).
  int64_t CountByDueTime(int64_t now_ms, int64_t precision_ms, int64_t bucket_ms,
                         std::vector<int64_t>* out) const;

  int64_t total() const { return total_; }
  int64_t ticks() const { return static_cast<int64_t>(by_tick_.size()); }
  int64_t underflows() const { return underflows_; }

 private:
  static constexpr int kChunkShift = 6;  // 64 ticks per chunk
  static int64_t ChunkOf(int64_t tick) { return tick >> kChunkShift; }  // floor, also < 0
  void SubChunk(int64_t tick, int64_t n);

  absl::flat_hash_map<int64_t, int64_t> by_tick_;  // tick -> pending count (> 0)
  absl::btree_map<int64_t, int64_t> by_chunk_;     // ChunkOf(tick) -> sum of its ticks (> 0)
  int64_t total_ = 0;
  int64_t underflows_ = 0;
};

}  // namespace tokimq
