// RealtimeBudget: when a timer service thread may run under SCHED_FIFO, and the thread-side
// helper that applies it (RealtimeThread).
//
// Why: a thread that sleeps until the next due millisecond is woken by the kernel on time, but
// under the ordinary scheduler (CFS/EEVDF) it then waits for a CPU behind whatever runs there.
// On the shared 2-core benchmark machine (load 12-15 of compilers) a 1 ms sleep woke p50 90 µs,
// p99 3.0-3.8 ms, max 7-15 ms late at nice -10 (and 1.8-3.0 ms p99 with a 100 µs EEVDF slice);
// under SCHED_FIFO priority 1 p50 35 µs, p99 67-84 µs, max 0.25-1.7 ms (docs/performance.md
// "Workload g"). The release of a message at its millisecond is that wake-up.
//
// Why a budget: a SCHED_FIFO thread is never preempted by ordinary threads, so one that has a
// lot to do (a hot second: 500k releases) would take a whole core from request handling, and a
// bug that spins would take it for good (the kernel's RT throttling leaves 5 %). The budget
// keeps a thread realtime only while it used at most `cpu_budget_us` of CPU in the current
// window of `window_us` of real time; past that it runs as an ordinary thread (its nice value,
// TimerStoreOptions::service_nice) until the window ends. So a mostly idle thread (low load:
// the case that needs the precise wake-up) is always realtime, and a busy one is an ordinary
// nice -10 thread for most of its busy time, as before.
//
// RealtimeBudget is pure logic on readings the caller passes (testable without threads or
// privileges). Not thread-safe: one per thread.
//
// Time: the window is measured on the injected Clock (the TimerStore's), like every other
// time in the store, so a ManualClock drives it in tests. The one reading that does not come
// from the Clock is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID): it measures CPU used, not
// time, and no Clock can stand in for it.
#pragma once

#include <cstdint>
#include <functional>

#include "common/clock.h"

namespace tokimq {

class RealtimeBudget {
 public:
  RealtimeBudget(int64_t window_us, int64_t cpu_budget_us)
      : window_us_(window_us), cpu_budget_us_(cpu_budget_us) {}

  // Whether the thread may be realtime now, given the time (µs, any origin: the Clock's
  // NowMicros) and the thread's CPU time (µs) read now. The first call opens the first window;
  // so does a time before the window's start (the clock was set back).
  bool Allowed(int64_t real_us, int64_t cpu_us);

 private:
  int64_t window_us_;
  int64_t cpu_budget_us_;
  bool started_ = false;
  int64_t window_real_us_ = 0;  // readings at the window's start
  int64_t window_cpu_us_ = 0;
};

// Applies a RealtimeBudget to the calling thread: SCHED_FIFO at `priority` while allowed,
// SCHED_OTHER (the thread's nice value is kept) otherwise. Construct and use on the thread it
// governs; `clock` (the window's time) must outlive it. priority 0: never realtime (Update
// does nothing). When the first switch fails (no CAP_SYS_NICE and RLIMIT_RTPRIO below
// `priority`) it logs one warning and gives up.
class RealtimeThread {
 public:
  // Defaults: at most 20 ms of CPU per 100 ms as a realtime thread (20 % of one core).
  static constexpr int64_t kWindowUs = 100'000;
  static constexpr int64_t kCpuBudgetUs = 20'000;

  RealtimeThread(int priority, const Clock* clock, int64_t window_us = kWindowUs,
                 int64_t cpu_budget_us = kCpuBudgetUs);
  // Call once per loop iteration, before the thread waits: switches the policy when the
  // budget's answer changed (one system call per change, none otherwise).
  void Update();
  bool realtime() const { return realtime_; }

  // Tests: the thread's CPU time (µs) and the policy switch (true: SCHED_FIFO; returns 0 or an
  // errno) go through these when set, instead of the kernel.
  std::function<int64_t()> TEST_cpu_us;
  std::function<int(bool realtime)> TEST_set_policy;

 private:
  int priority_;
  const Clock* clock_;
  RealtimeBudget budget_;
  bool realtime_ = false;
};

}  // namespace tokimq
