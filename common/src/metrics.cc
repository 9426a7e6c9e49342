#include "common/metrics.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_format.h"

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
  // max first, then the bucket with release: a Snapshot that sees the bucket (acquire) also sees
  // a max >= v.
  int64_t cur = max_.load(std::memory_order_relaxed);
  while (v > cur && !max_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
  buckets_[BucketOf(v)].fetch_add(1, std::memory_order_release);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot s;
  for (int b = 0; b < kBuckets; ++b) {
    int64_t n = buckets_[b].load(std::memory_order_acquire);
    if (n == 0) continue;
    s.buckets.push_back(HistogramBucket{UpperBound(b), n});
    s.count += n;
  }
  s.max = max_.load(std::memory_order_relaxed);
  return s;
}

int64_t HistogramSnapshot::Percentile(double q) const {
  if (count == 0) return 0;
  auto rank = static_cast<int64_t>(q * static_cast<double>(count));
  if (rank >= count) rank = count - 1;
  int64_t seen = 0;
  for (const HistogramBucket& b : buckets) {
    seen += b.count;
    if (seen > rank) return std::min(b.upper_bound, max);
  }
  return max;
}

absl::StatusOr<HistogramSnapshot> HistogramSnapshot::Delta(const HistogramSnapshot& before,
                                                           const HistogramSnapshot& after) {
  HistogramSnapshot d;
  size_t i = 0;  // walks before.buckets alongside after.buckets (both ascending)
  for (const HistogramBucket& a : after.buckets) {
    int64_t earlier = 0;
    for (; i < before.buckets.size() && before.buckets[i].upper_bound <= a.upper_bound; ++i) {
      if (before.buckets[i].upper_bound < a.upper_bound) {
        return absl::FailedPreconditionError(
            absl::StrFormat("histogram bucket <= %d emptied between snapshots (reset?)",
                            before.buckets[i].upper_bound));
      }
      earlier = before.buckets[i].count;
    }
    if (a.count < earlier) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "histogram bucket <= %d went down from %d to %d between snapshots (reset?)",
          a.upper_bound, earlier, a.count));
    }
    if (a.count == earlier) continue;
    d.buckets.push_back(HistogramBucket{a.upper_bound, a.count - earlier});
    d.count += a.count - earlier;
  }
  if (i < before.buckets.size()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("histogram bucket <= %d emptied between snapshots (reset?)",
                        before.buckets[i].upper_bound));
  }
  if (!d.buckets.empty()) d.max = std::min(d.buckets.back().upper_bound, after.max);
  return d;
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
  sum_.store(0);
}

}  // namespace tokimq
