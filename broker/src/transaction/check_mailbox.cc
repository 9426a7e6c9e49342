#include "transaction/check_mailbox.h"

#include "common/clock.h"

namespace tokimq::broker {

bool CheckMailbox::Offer(proto::TransactionCheck check) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = topics_.find(check.topic());
  if (it == topics_.end()) return false;
  Topic& t = it->second;
  bool live = t.waiting > 0 ||
              RealTimeNow() - t.last_poll < std::chrono::milliseconds(live_ms_);
  if (!live) return false;
  if (t.queued.size() >= kMaxQueuedPerTopic) t.queued.pop_front();
  t.queued.push_back(std::move(check));
  cv_.notify_all();
  return true;
}

void CheckMailbox::TakeLocked(const std::vector<std::string>& topics, int max,
                              std::vector<proto::TransactionCheck>* out) {
  for (const std::string& name : topics) {
    auto it = topics_.find(name);
    if (it == topics_.end()) continue;
    auto& q = it->second.queued;
    while (!q.empty() && static_cast<int>(out->size()) < max) {
      out->push_back(std::move(q.front()));
      q.pop_front();
    }
  }
}

std::vector<proto::TransactionCheck> CheckMailbox::Poll(const std::vector<std::string>& topics,
                                                         int64_t long_poll_ms, int max_checks) {
  if (max_checks <= 0) max_checks = 32;
  std::vector<proto::TransactionCheck> out;
  std::unique_lock<std::mutex> lock(mu_);
  for (const std::string& name : topics) {
    Topic& t = topics_[name];
    t.last_poll = RealTimeNow();
    ++t.waiting;
  }
  auto deadline = RealTimeDeadline(std::chrono::milliseconds(std::max<int64_t>(0, long_poll_ms)));
  for (;;) {
    TakeLocked(topics, max_checks, &out);
    if (!out.empty() || shutdown_) break;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      TakeLocked(topics, max_checks, &out);
      break;
    }
  }
  for (const std::string& name : topics) {
    Topic& t = topics_[name];
    t.last_poll = RealTimeNow();
    --t.waiting;
  }
  return out;
}

void CheckMailbox::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

}  // namespace tokimq::broker
