// TopicSendCounters: messages stored per topic for producers since the broker started
// (TopicStats.messages_sent, tokimq_messages_sent_total{topic}; docs/metrics.md).
//
// In memory only (reset by a restart; Prometheus' rate() handles the reset). One entry per
// topic that received a send during this process's life (topics are operator-created, so the
// map is bounded by them). Cost on the send path: one shared lock and one hash look-up per
// topic of a request, plus an atomic add. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace tokimq::broker {

class TopicSendCounters {
 public:
  void Add(const std::string& topic, int64_t n) {
    {
      std::shared_lock<std::shared_mutex> l(mu_);
      auto it = counts_.find(topic);
      if (it != counts_.end()) {
        it->second->fetch_add(n, std::memory_order_relaxed);
        return;
      }
    }
    std::unique_lock<std::shared_mutex> l(mu_);
    auto& slot = counts_[topic];
    if (!slot) slot = std::make_unique<std::atomic<int64_t>>(0);
    slot->fetch_add(n, std::memory_order_relaxed);
  }
  int64_t Get(const std::string& topic) const {
    std::shared_lock<std::shared_mutex> l(mu_);
    auto it = counts_.find(topic);
    return it == counts_.end() ? 0 : it->second->load(std::memory_order_relaxed);
  }

 private:
  mutable std::shared_mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<std::atomic<int64_t>>> counts_;
};

}  // namespace tokimq::broker
