// In-process metrics: counters, gauges and a latency histogram. Lock-free, thread-safe, no
// allocation after construction. Exported by the broker's Stats request.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

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
  // q in [0, 1]. 0 when empty.
  int64_t Percentile(double q) const;
  void Reset();

 private:
  static int BucketOf(int64_t v);
  static int64_t UpperBound(int bucket);
  std::array<std::atomic<int64_t>, kBuckets> buckets_{};
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> max_{0};
};

}  // namespace tokimq
