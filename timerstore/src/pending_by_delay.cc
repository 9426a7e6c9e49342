#include "pending_by_delay.h"

#include <algorithm>

namespace tokimq {

void PendingByDelay::Add(int64_t tick, int64_t n) {
  if (n <= 0) return;
  by_tick_[tick] += n;
  by_chunk_[ChunkOf(tick)] += n;
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
    n = it->second;
    by_tick_.erase(it);
  } else {
    it->second -= n;
  }
  SubChunk(tick, n);
  total_ -= n;
}

void PendingByDelay::SubChunk(int64_t tick, int64_t n) {
  auto c = by_chunk_.find(ChunkOf(tick));
  if (c == by_chunk_.end()) return;  // never: chunk sums include every tick's count
  c->second -= n;
  if (c->second <= 0) by_chunk_.erase(c);
}

void PendingByDelay::Clear() {
  by_tick_.clear();
  by_chunk_.clear();
  total_ = 0;
}

int64_t PendingByDelay::CountByDueTime(int64_t now_ms, int64_t precision_ms, int64_t bucket_ms,
                                       std::vector<int64_t>* out) const {
  std::fill(out->begin(), out->end(), 0);
  const int64_t n = static_cast<int64_t>(out->size());
  if (n == 0 || bucket_ms <= 0) return total_;
  auto bucket_of = [&](int64_t tick) {  // n: beyond the last bucket
    const int64_t start = tick * precision_ms - now_ms;
    return start < 0 ? 0 : std::min(n, start / bucket_ms);
  };
  int64_t counted = 0;
  for (const auto& [chunk, sum] : by_chunk_) {
    const int64_t first = chunk << kChunkShift;
    const int64_t last = first + (int64_t{1} << kChunkShift) - 1;
    const int64_t b_first = bucket_of(first);
    if (b_first == n) break;
    if (bucket_of(last) == b_first) {
      (*out)[b_first] += sum;
      counted += sum;
      continue;
    }
    for (int64_t t = first; t <= last; ++t) {
      auto it = by_tick_.find(t);
      if (it == by_tick_.end()) continue;
      const int64_t b = bucket_of(t);
      if (b == n) break;
      (*out)[b] += it->second;
      counted += it->second;
    }
  }
  return total_ - counted;
}

void PendingByDelay::Buckets(int64_t now_ms, int64_t precision_ms, int64_t out[kBuckets]) const {
  for (int b = 0; b < kBuckets; ++b) out[b] = 0;
  // The bucket of tick t: the first whose bound is >= t * P - now (the last if none).
  auto bucket_of = [&](int64_t tick) {
    const int64_t remaining = tick * precision_ms - now_ms;
    int b = 0;
    while (b < kBuckets - 1 && remaining > kBoundsMs[b]) ++b;
    return b;
  };
  int64_t counted = 0;
  for (const auto& [chunk, sum] : by_chunk_) {
    const int64_t first = chunk << kChunkShift;
    const int64_t last = first + (int64_t{1} << kChunkShift) - 1;
    const int b_first = bucket_of(first);
    if (b_first == kBuckets - 1) break;  // this chunk and all later ones: beyond the last bound
    if (bucket_of(last) == b_first) {
      out[b_first] += sum;
      counted += sum;
      continue;
    }
    for (int64_t t = first; t <= last; ++t) {  // straddles a bound: tick by tick
      auto it = by_tick_.find(t);
      if (it == by_tick_.end()) continue;
      const int b = bucket_of(t);
      if (b == kBuckets - 1) break;
      out[b] += it->second;
      counted += it->second;
    }
  }
  out[kBuckets - 1] = total_ - counted;
}

}  // namespace tokimq
