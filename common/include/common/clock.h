// Time source. Only this component reads the system clock (STYLE.md rule 5); every other
// component takes a `Clock&` so tests can drive time by hand.
//
// Units: NowMs() is milliseconds since the Unix epoch (wall time: deliver times are absolute);
// NowMicros() is microseconds since the Unix epoch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace tokimq {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMicros() const = 0;
  int64_t NowMs() const { return NowMicros() / 1000; }

  // Blocks the calling thread until NowMs() >= deadline_ms, or until `timeout` of real time has
  // passed, whichever is first (any deadline_ms, up to INT64_MAX for "none"). SystemClock sleeps; ManualClock wakes on AdvanceMs/SetMs. Used by
  // service threads so that no service busy-spins and manual-clock brokers still react at once.
  virtual void WaitUntilMs(int64_t deadline_ms, std::chrono::milliseconds timeout) const = 0;

  // True for ManualClock: the broker refuses the admin "advance clock" request otherwise.
  virtual bool IsManual() const { return false; }
};

// Real-time deadline `after` from now on the monotonic clock, for bounded condvar waits, network
// timeouts and long polls that must end even when a ManualClock never moves. Not a time of day:
// message times always come from a Clock.
inline std::chrono::steady_clock::time_point RealTimeDeadline(std::chrono::milliseconds after) {
  return std::chrono::steady_clock::now() + after;
}

// The monotonic clock now, and the real time in µs since such a reading: for log lines that
// report how long work took (0 elapsed on a ManualClock would say nothing). Not a time of day.
inline std::chrono::steady_clock::time_point RealTimeNow() { return std::chrono::steady_clock::now(); }
inline int64_t RealTimeMicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// Reads std::chrono::system_clock. Thread-safe. Process-wide singleton via Default().
class SystemClock final : public Clock {
 public:
  static SystemClock* Default();
  int64_t NowMicros() const override;
  void WaitUntilMs(int64_t deadline_ms, std::chrono::milliseconds timeout) const override;
};

// Time that moves only when told. Thread-safe: any thread may read or advance it; waiters in
// WaitUntilMs wake on every change. Time never goes backwards (SetMs to an earlier time is
// ignored).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : micros_(start_ms * 1000) {}
  int64_t NowMicros() const override { return micros_.load(std::memory_order_acquire); }
  void WaitUntilMs(int64_t deadline_ms, std::chrono::milliseconds timeout) const override;
  bool IsManual() const override { return true; }

  void AdvanceMs(int64_t ms) { AdvanceMicros(ms * 1000); }
  void AdvanceMicros(int64_t us);
  void SetMs(int64_t ms);

 private:
  std::atomic<int64_t> micros_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
};

}  // namespace tokimq
