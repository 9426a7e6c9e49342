#include "common/metrics.h"

#include <bit>

namespace tokimq {

int Histogram::BucketOf(int64_t v) {
  if (v < 0) v = 0;
  if (v < 64) return static_cast<int>(v);
  auto u = static_cast<uint64_t>(v);
  int msb = 63 - std::countl_zero(u);  // >= 6
  int sub = static_cast<int>((u >> (msb - 4)) & (kSubBuckets - 1));
  int b = 64 + (msb - 6) * kSubBuckets + sub;
  return b < kBuckets ? b : kBuckets - 1;
}

int64_t Histogram::UpperBound(int bucket) {
  if (bucket < 64) return bucket;
  int msb = (bucket - 64) / kSubBuckets + 6;
  int sub = (bucket - 64) % kSubBuckets;
  uint64_t base = (uint64_t{1} << msb) | (static_cast<uint64_t>(sub) << (msb - 4));
  return static_cast<int64_t>(base + (uint64_t{1} << (msb - 4)) - 1);
}

void Histogram::Record(int64_t v) {
  if (v < 0) v = 0;
  buckets_[BucketOf(v)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  int64_t cur = max_.load(std::memory_order_relaxed);
  while (v > cur && !max_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

int64_t Histogram::Percentile(double q) const {
  int64_t total = Count();
  if (total == 0) return 0;
  auto rank = static_cast<int64_t>(q * static_cast<double>(total));
  if (rank >= total) rank = total - 1;
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b].load(std::memory_order_relaxed);
    if (seen > rank) {
      int64_t ub = UpperBound(b);
      return ub < Max() ? ub : Max();
    }
  }
  return Max();
}

void Histogram::Reset() {
  for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
  count_.store(0);
  max_.store(0);
}

}  // namespace tokimq
