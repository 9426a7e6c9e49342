#include "realtime_budget.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstring>

#include "common/logging.h"

namespace tokimq {
namespace {

// The thread's CPU time, µs. Read from the kernel, not from a Clock: it is the one reading of
// the timer store that measures CPU used rather than time (realtime_budget.h).
int64_t ThreadCpuMicros() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace

bool RealtimeBudget::Allowed(int64_t real_us, int64_t cpu_us) {
  if (!started_ || real_us < window_real_us_ || real_us - window_real_us_ >= window_us_) {
    started_ = true;
    window_real_us_ = real_us;
    window_cpu_us_ = cpu_us;
    return true;
  }
  return cpu_us - window_cpu_us_ <= cpu_budget_us_;
}

RealtimeThread::RealtimeThread(int priority, const Clock* clock, int64_t window_us,
                               int64_t cpu_budget_us)
    : priority_(priority), clock_(clock), budget_(window_us, cpu_budget_us) {}

void RealtimeThread::Update() {
  if (priority_ <= 0) return;
  const int64_t cpu_us = TEST_cpu_us ? TEST_cpu_us() : ThreadCpuMicros();
  const bool want = budget_.Allowed(clock_->NowMicros(), cpu_us);
  if (want == realtime_) return;
  int rc = 0;
  if (TEST_set_policy) {
    rc = TEST_set_policy(want);
  } else {
    sched_param p{};
    p.sched_priority = want ? priority_ : 0;
    // SCHED_OTHER keeps the thread's nice value (service_nice).
    rc = ::pthread_setschedparam(::pthread_self(), want ? SCHED_FIFO : SCHED_OTHER, &p);
  }
  if (rc == 0) {
    realtime_ = want;
    return;
  }
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    TOKIMQ_LOG_WARN(
        "timerstore: cannot run the timer's dequeue threads under SCHED_FIFO priority {} ({}); "
        "they run as ordinary threads (releases can be a few ms late on a busy machine)",
        priority_, std::strerror(rc));
  }
  priority_ = 0;  // give up: the next calls do nothing
}

}  // namespace tokimq
