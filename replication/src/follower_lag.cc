#include "replication/follower_lag.h"

#include <algorithm>
#include <limits>

namespace tokimq::replication {

void FollowerLag::OnLeaderEnd(PhysicalOffset end) {
  std::lock_guard<std::mutex> l(mu_);
  if (end <= end_) return;
  end_ = end;
  samples_.emplace_back(end, clock_->NowMs());
  TrimLocked();
}

void FollowerLag::OnPull(const std::string& follower, PhysicalOffset acked) {
  std::lock_guard<std::mutex> l(mu_);
  Follower& f = followers_[follower];
  f.acked = std::max(f.acked, acked);
  f.last_pull_ms = clock_->NowMs();
  TrimLocked();
}

void FollowerLag::Reset() {
  std::lock_guard<std::mutex> l(mu_);
  followers_.clear();
  samples_.clear();
  end_ = PhysicalOffset(0);
}

void FollowerLag::TrimLocked() {
  PhysicalOffset lowest(std::numeric_limits<int64_t>::max());
  for (const auto& [id, f] : followers_) lowest = std::min(lowest, f.acked);
  // A sample at or below every follower's end can no longer be the first byte one misses.
  while (samples_.size() > 1 && samples_.front().first <= lowest) samples_.pop_front();
  while (samples_.size() > kMaxSamples) samples_.pop_front();
}

std::vector<FollowerLag::Entry> FollowerLag::Snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  const int64_t now = clock_->NowMs();
  std::vector<Entry> out;
  for (const auto& [id, f] : followers_) {
    Entry e;
    e.follower = id;
    e.acked_offset = f.acked;
    e.lag_bytes = std::max<int64_t>(end_ - f.acked, 0);
    e.last_pull_ms = now - f.last_pull_ms;
    if (e.lag_bytes > 0) {
      // The first sample whose end passed the follower's: its bytes are the oldest missing.
      auto it = std::upper_bound(
          samples_.begin(), samples_.end(), f.acked,
          [](PhysicalOffset a, const std::pair<PhysicalOffset, int64_t>& s) {
            return a < s.first;
          });
      if (it != samples_.end()) e.lag_ms = now - it->second;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tokimq::replication
