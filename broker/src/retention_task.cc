#include "retention_task.h"

#include <algorithm>
#include <chrono>

#include "commitlog/message_store.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/logging.h"

namespace tokimq::broker {

RetentionTask::RetentionTask(Clock* clock, MessageStore* store, int64_t interval_ms, AgeFn age)
    : clock_(clock), store_(store), interval_ms_(interval_ms), age_(std::move(age)) {}

RetentionTask::~RetentionTask() { Stop(); }

void RetentionTask::Start() {
  if (interval_ms_ <= 0 || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void RetentionTask::Stop() {
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<int> RetentionTask::RunOnce() {
  std::lock_guard<std::mutex> l(run_mu_);
  const int64_t age = age_();
  last_age_ms_.store(age, std::memory_order_release);
  int deleted = 0;
  if (age > 0) {
    absl::StatusOr<int> n = store_->DeleteExpired(age);
    if (!n.ok()) return n.status();
    deleted = *n;
  }
  deleted_.fetch_add(deleted, std::memory_order_acq_rel);
  last_run_ms_.store(clock_->NowMs(), std::memory_order_release);
  runs_.fetch_add(1, std::memory_order_acq_rel);
  return deleted;
}

void RetentionTask::Loop() {
  int64_t next_ms = clock_->NowMs() + interval_ms_;
  while (true) {
    {
      std::lock_guard<std::mutex> l(stop_mu_);
      if (stopping_) return;
    }
    const int64_t now = clock_->NowMs();
    if (now >= next_ms) {
      absl::StatusOr<int> n = RunOnce();
      if (!n.ok()) {
        // Not fatal: the segments stay and the next run tries again.
        TOKIMQ_LOG_ERROR("retention: {}", n.status().ToString());
      } else if (*n > 0) {
        TOKIMQ_LOG_INFO(
            "retention: deleted {} commit log segment(s) older than {}; first "
            "offset now {}",
            *n, FormatDuration(last_age_ms()), store_->commit_log()->MinOffset().value());
      }
      next_ms = clock_->NowMs() + interval_ms_;
      continue;
    }
    if (clock_->IsManual()) {
      // Wakes on every AdvanceClock; the short real-time cap only bounds how long Stop waits.
      clock_->WaitUntilMs(next_ms, std::chrono::milliseconds(50));
    } else {
      // Capped at 1 s so a wall-clock step is noticed without waiting out a whole interval.
      const auto wait = std::chrono::milliseconds(std::min<int64_t>(next_ms - now, 1000));
      std::unique_lock<std::mutex> l(stop_mu_);
      stop_cv_.wait_for(l, wait, [this] { return stopping_; });
    }
  }
}

}  // namespace tokimq::broker
