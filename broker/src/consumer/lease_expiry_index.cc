#include "consumer/lease_expiry_index.h"

#include <algorithm>
#include <cstdint>

namespace tokimq::consumer {

void LeaseExpiryIndex::Add(int64_t deadline_ms, const Expiry& e) {
  std::lock_guard<std::mutex> l(mu_);
  const bool earliest = entries_.empty() || deadline_ms < entries_.begin()->first;
  entries_.emplace(deadline_ms, e);
  if (earliest) cv_.notify_one();
}

bool LeaseExpiryIndex::PopDue(int64_t now_ms, int64_t* deadline_ms, Expiry* e) {
  std::lock_guard<std::mutex> l(mu_);
  if (entries_.empty() || entries_.begin()->first > now_ms) return false;
  *deadline_ms = entries_.begin()->first;
  *e = entries_.begin()->second;
  entries_.erase(entries_.begin());
  return true;
}

int64_t LeaseExpiryIndex::NextMs() const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.empty() ? INT64_MAX : entries_.begin()->first;
}

size_t LeaseExpiryIndex::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.size();
}

bool LeaseExpiryIndex::OverCompactionBound(int64_t live) const {
  std::lock_guard<std::mutex> l(mu_);
  const size_t bound = std::max<size_t>(4 * static_cast<size_t>(std::max<int64_t>(live, 0) + 1024),
                                        2 * size_after_compaction_);
  return entries_.size() > bound;
}

size_t LeaseExpiryIndex::TakeAll() {
  std::multimap<int64_t, Expiry> old;
  {
    std::lock_guard<std::mutex> l(mu_);
    old.swap(entries_);
  }
  return old.size();
}

void LeaseExpiryIndex::FinishCompaction() {
  std::lock_guard<std::mutex> l(mu_);
  size_after_compaction_ = entries_.size();
}

void LeaseExpiryIndex::WaitForEarlier(int64_t next_ms, std::chrono::milliseconds timeout,
                                      const std::function<bool()>& stop) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, timeout, [&] {
    return stop() || (!entries_.empty() && entries_.begin()->first < next_ms);
  });
}

void LeaseExpiryIndex::Wake() {
  std::lock_guard<std::mutex> l(mu_);
  cv_.notify_all();
}

}  // namespace tokimq::consumer
