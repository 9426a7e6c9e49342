#include "common/clock.h"

#include <thread>

namespace tokimq {

SystemClock* SystemClock::Default() {
  static SystemClock clock;
  return &clock;
}

int64_t SystemClock::NowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SystemClock::WaitUntilMs(int64_t deadline_ms, std::chrono::milliseconds timeout) const {
  // A far deadline (INT64_MAX: "nothing due") waits the timeout; no overflow in ms -> us.
  const int64_t now_us = NowMicros();
  if (deadline_ms >= (INT64_MAX - now_us) / 1000) {
    std::this_thread::sleep_for(timeout);
    return;
  }
  int64_t wait_us = deadline_ms * 1000 - now_us;
  if (wait_us <= 0) return;
  auto wait = std::min<std::chrono::microseconds>(std::chrono::microseconds(wait_us), timeout);
  std::this_thread::sleep_for(wait);
}

void ManualClock::WaitUntilMs(int64_t deadline_ms, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return NowMs() >= deadline_ms; });
}

void ManualClock::AdvanceMicros(int64_t us) {
  if (us <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    micros_.fetch_add(us, std::memory_order_acq_rel);
  }
  cv_.notify_all();
}

void ManualClock::SetMs(int64_t ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t target = ms * 1000;
    if (target <= micros_.load()) return;
    micros_.store(target, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace tokimq
