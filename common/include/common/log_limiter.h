// LogLimiter: lets through at most `burst` log lines per `interval_ms` for one kind of event and
// counts the ones it holds back, so a path that can fail once per message (a poison message,
// a refused put) logs a line per event at low rates and a bounded number under a flood.
//
// Time comes from the caller (a Clock reading, ms), so tests drive it without sleeping.
// Owned by the component that logs; thread-safe (a mutex around three integers).
//
//   if (uint64_t held; limiter.Allow(clock->NowMs(), &held)) {
//     TOKIMQ_LOG_WARN("... ({} similar lines suppressed)", held);
//   }
#pragma once

#include <cstdint>
#include <mutex>

namespace tokimq {

class LogLimiter {
 public:
  // burst >= 1 lines per interval_ms > 0.
  LogLimiter(int64_t burst, int64_t interval_ms) : burst_(burst), interval_ms_(interval_ms) {}

  // True when a line may be logged now; *suppressed then gets the number of events held back
  // since the last line let through (and the count restarts). False: the event is counted.
  bool Allow(int64_t now_ms, uint64_t* suppressed) {
    std::lock_guard<std::mutex> l(mu_);
    if (now_ms >= window_start_ms_ + interval_ms_ || now_ms < window_start_ms_) {
      window_start_ms_ = now_ms;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++held_;
      return false;
    }
    ++in_window_;
    *suppressed = held_;
    held_ = 0;
    return true;
  }

 private:
  const int64_t burst_;
  const int64_t interval_ms_;
  std::mutex mu_;
  int64_t window_start_ms_ = INT64_MIN / 2;  // guarded by mu_
  int64_t in_window_ = 0;                    // guarded by mu_
  uint64_t held_ = 0;                        // guarded by mu_
};

}  // namespace tokimq
