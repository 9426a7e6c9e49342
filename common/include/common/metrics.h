// In-process metrics: counters, gauges and a latency histogram. Lock-free, thread-safe, no
// allocation after construction (Histogram::Snapshot allocates its copy). Exported by the
// broker's Stats request.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tokimq {

// Monotonic count of events.
class Counter {
 public:
  void Add(int64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  int64_t Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
};

// A level that goes up and down (pending messages, in-flight leases). Never reported below zero:
// Sub saturates at 0 and counts the would-be underflow in underflows() so tests can assert none.
class Gauge {
 public:
  void Add(int64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  void Sub(int64_t n = 1) {
    int64_t cur = v_.load(std::memory_order_relaxed);
    while (true) {
      int64_t next = cur - n;
      if (next < 0) {
        underflows_.fetch_add(1, std::memory_order_relaxed);
        next = 0;
      }
      if (v_.compare_exchange_weak(cur, next, std::memory_order_relaxed)) return;
    }
  }
  void Set(int64_t n) { v_.store(n, std::memory_order_relaxed); }
  int64_t Value() const { return v_.load(std::memory_order_relaxed); }
  int64_t underflows() const { return underflows_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
  std::atomic<int64_t> underflows_{0};
};

// One bucket of a Histogram: the values v with previous bucket's upper_bound < v <= upper_bound.
struct HistogramBucket {
  int64_t upper_bound = 0;
  int64_t count = 0;

  bool operator==(const HistogramBucket&) const = default;
};

// A copy of a Histogram's buckets at one moment, or the difference of two such copies (what was
// recorded between them). A plain value: no locking, any thread that owns it.
struct HistogramSnapshot {
  std::vector<HistogramBucket> buckets;  // non-empty only, ascending by upper_bound
  int64_t count = 0;                     // sum of the bucket counts
  // Largest value recorded: exact in a snapshot of a Histogram; in a Delta, the upper bound of
  // the highest non-empty bucket, lowered to the later snapshot's max (never below the true max
  // of the window, at most 6.25 % above it).
  int64_t max = 0;

  // Upper bound of the bucket holding the q-quantile (q in [0, 1]), at most `max`; the same rule
  // as Histogram::Percentile. 0 when empty.
  int64_t Percentile(double q) const;

  // What was recorded between `before` and `after`, two snapshots of the same Histogram taken in
  // that order. Error kFailedPrecondition when a bucket count went down (the histogram was reset
  // or the snapshots come from different histograms, e.g. the broker restarted in between).
  static absl::StatusOr<HistogramSnapshot> Delta(const HistogramSnapshot& before,
                                                 const HistogramSnapshot& after);
};

// Histogram of non-negative integer values (ms) in log-linear buckets: exact below 64, then 16
// sub-buckets per power of two (relative error under 6.25 %). Percentile(q) returns the upper
// bound of the bucket holding the q-quantile; Max() is exact.
class Histogram {
 public:
  static constexpr int kSubBuckets = 16;
  static constexpr int kBuckets = 64 + 58 * kSubBuckets;

  void Record(int64_t v);
  int64_t Count() const { return count_.load(std::memory_order_relaxed); }
  int64_t Max() const { return max_.load(std::memory_order_relaxed); }
  // Sum of the recorded values (negative ones as 0), for Prometheus' histogram _sum. Read on its
  // own it may lag or lead a concurrent Snapshot by the values being recorded.
  int64_t Sum() const { return sum_.load(std::memory_order_relaxed); }
  // q in [0, 1]. 0 when empty.
  int64_t Percentile(double q) const;
  // The non-empty buckets, their sum and the max. Any thread, concurrently with Record: each
  // bucket is read once, so a Record racing with the copy is either in it or not (count is the
  // sum of the copied buckets, so it may differ from Count() read at another moment); every
  // value counted in the copy is <= its max. Allocates; not for the Record path.
  HistogramSnapshot Snapshot() const;
  void Reset();

  // Inclusive upper bound of bucket `bucket` (0 <= bucket < kBuckets).
  static int64_t UpperBound(int bucket);

 private:
  static int BucketOf(int64_t v);
  std::array<std::atomic<int64_t>, kBuckets> buckets_{};
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> max_{0};
  std::atomic<int64_t> sum_{0};
};

}  // namespace tokimq
