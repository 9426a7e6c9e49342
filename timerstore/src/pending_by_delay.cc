#include "pending_by_delay.h"

namespace tokimq {

void PendingByDelay::Add(int64_t tick, int64_t n) {
  if (n <= 0) return;
  by_tick_[tick] += n;
  total_ += n;
}

void PendingByDelay::Sub(int64_t tick, int64_t n) {
  if (n <= 0) return;
  auto it = by_tick_.find(tick);
  if (it == by_tick_.end()) {
    ++underflows_;
    return;
  }
  if (it->second <= n) {
    if (it->second < n) ++underflows_;
    total_ -= it->second;
    by_tick_.erase(it);
    return;
  }
  it->second -= n;
  total_ -= n;
}

void PendingByDelay::Clear() {
  by_tick_.clear();
  total_ = 0;
}

void PendingByDelay::Buckets(int64_t now_ms, int64_t precision_ms, int64_t out[kBuckets]) const {
  for (int b = 0; b < kBuckets; ++b) out[b] = 0;
  int64_t counted = 0;
  int b = 0;
  for (const auto& [tick, n] : by_tick_) {
    const int64_t remaining = tick * precision_ms - now_ms;
    while (b < kBuckets - 1 && remaining > kBoundsMs[b]) ++b;
    if (b == kBuckets - 1) break;  // the rest is beyond the largest bound
    out[b] += n;
    counted += n;
  }
  out[kBuckets - 1] = total_ - counted;
}

}  // namespace tokimq
