#include "in_flight_cache.h"

namespace tokimq::rocketmq {

int64_t InFlightCache::Cost(const proto::ReceivedMessage& m) {
  int64_t cost = static_cast<int64_t>(m.body().size() + m.receipt_handle().size()) + 256;
  for (const auto& [k, v] : m.properties()) cost += static_cast<int64_t>(k.size() + v.size());
  return cost;
}

void InFlightCache::Put(const std::string& receipt_handle, const proto::ReceivedMessage& m) {
  const int64_t cost = Cost(m);
  if (cost > max_bytes_) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = entries_.emplace(receipt_handle, m);
  if (!inserted) return;
  bytes_ += cost;
  order_.push_back(receipt_handle);
  EvictLocked();
}

std::optional<proto::ReceivedMessage> InFlightCache::Get(const std::string& receipt_handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(receipt_handle);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void InFlightCache::Rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(from);
  if (it == entries_.end()) return;
  proto::ReceivedMessage m = std::move(it->second);
  entries_.erase(it);
  m.set_receipt_handle(to);
  entries_.emplace(to, std::move(m));
  order_.push_back(to);  // the old handle's slot in order_ is skipped when reached
}

void InFlightCache::Erase(const std::string& receipt_handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(receipt_handle);
  if (it == entries_.end()) return;
  bytes_ -= Cost(it->second);
  entries_.erase(it);
  // Drop stale handles at the front so order_ does not grow with acked messages.
  while (!order_.empty() && entries_.count(order_.front()) == 0) order_.pop_front();
  if (order_.size() > 2 * entries_.size() + 1024) {
    std::deque<std::string> live;
    for (std::string& h : order_) {
      if (entries_.count(h) != 0) live.push_back(std::move(h));
    }
    order_.swap(live);
  }
}

void InFlightCache::EvictLocked() {
  while (bytes_ > max_bytes_ && !order_.empty()) {
    auto it = entries_.find(order_.front());
    order_.pop_front();
    if (it == entries_.end()) continue;
    bytes_ -= Cost(it->second);
    entries_.erase(it);
  }
}

int64_t InFlightCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t InFlightCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace tokimq::rocketmq
