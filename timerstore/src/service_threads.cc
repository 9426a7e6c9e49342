// The timer store's threads: the enqueue, dequeue read and dequeue put services (WorkerLoop),
// the checkpoint thread, their start and stop, the wait for the next due millisecond, and the
// backoff after a transient error (kResourceExhausted: disk full, out of descriptors or memory),
// logged once per state change. The steps they run live in enqueue_service.cc, dequeue_walk.cc
// and dequeue_service.cc; tests drive the same steps without threads (RunUntilIdle).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <latch>

#include "common/logging.h"
#include "common/status.h"
#include "realtime_budget.h"
#include "timer_store_impl.h"

namespace tokimq {

void TimerStoreImpl::CheckpointLoop() {
  int64_t last_checkpoint = clock_->NowMs();
  while (true) {
    {
      std::lock_guard<std::mutex> l(run_mu_);
      if (stopping_) return;
    }
    int64_t now = clock_->NowMs();
    if (now - last_checkpoint >= options_.checkpoint_interval_ms) {
      absl::Status cs = Checkpoint();
      if (absl::IsResourceExhausted(cs)) {
        // Disk full: nothing is lost (the data stays in memory and in the CommitLog), the next
        // interval tries again.
        NoteOutOfSpace(cs, "checkpoint");
      } else if (!cs.ok()) {
        TOKIMQ_LOG_ERROR("timerstore checkpoint: {}", cs.ToString());
        std::lock_guard<std::mutex> l(run_mu_);
        if (bg_status_.ok()) bg_status_ = cs;
      } else {
        NoteWritesSucceed();
      }
      last_checkpoint = now;
    }
    // Short real-time cap so Stop() is noticed quickly.
    clock_->WaitUntilMs(last_checkpoint + options_.checkpoint_interval_ms,
                        std::chrono::milliseconds(10));
  }
}

void TimerStoreImpl::NoteOutOfSpace(const absl::Status& s, const char* what) {
  if (!out_of_space_.exchange(true, std::memory_order_acq_rel)) {
    TOKIMQ_LOG_WARN(
        "timerstore: {} ran out of a resource (disk space, file descriptors or memory: {}); "
        "retrying with backoff",
        what, s.ToString());
  }
}

void TimerStoreImpl::NoteWritesSucceed() {
  if (out_of_space_.load(std::memory_order_relaxed) &&
      out_of_space_.exchange(false, std::memory_order_acq_rel)) {
    TOKIMQ_LOG_INFO("timerstore: writes succeed again after running out of a resource");
  }
}

void TimerStoreImpl::WorkerLoop(int which, RealtimeThread* realtime) {
  int64_t backoff_ms = 0;  // after a transient error (kResourceExhausted: disk full, out of
                           // descriptors or memory): 10 ms doubling to 1 s
  while (true) {
    realtime->Update();
    // No run_mu_ here: four threads taking it every iteration contended with each other and
    // with WakeEnqueue (perf: mutex hand-over wakes in WorkerLoop, issue 21 item 1).
    if (stopping_.load(std::memory_order_acquire)) return;
    size_t n = 0;
    absl::Status st;
    auto run = [&](absl::StatusOr<size_t> r) {
      if (r.ok())
        n += *r;
      else if (st.ok())
        st = r.status();
    };
    int64_t wake_ms = 0;  // dequeue get: when the next slot is due to be walked
    bool put_queue_full = false;
    if (which == 0) {
      run(EnqueueGetStep());
      run(EnqueuePutStep());
    } else if (which == 1) {
      // Dequeue get: walking a busy slot reads one TimerLog unit per message (100k+ for a
      // busy second); on a thread of its own it never holds up the releases of the current
      // second (it used to share a thread with dequeue read).
      run(DequeueGetStep());
      std::lock_guard<std::mutex> l(mu_);
      wake_ms = (next_walk_tick_ - 1) * options_.precision_ms;
    } else if (which == 3) {
      run(DequeueReadStep());
      std::lock_guard<std::mutex> l(mu_);
      put_queue_full = put_queue_.size() >= kPutQueueCap;
      if (!put_queue_.empty()) put_cv_.notify_all();
    } else {
      run(DequeuePutStep());
      if (n > 0) put_cv_.notify_all();  // room in put_queue_ for dequeue read
    }
    if (absl::IsResourceExhausted(st)) {
      // Disk full (the CommitLog cut the failed put back; the units wait to be put again):
      // transient, not a service failure. Back off rather than retry hot (the retry loop
      // logged ~6,000 lines/s), and log once per state change.
      NoteOutOfSpace(st, which == 2 ? "dequeue put" : "a timer service");
      backoff_ms = std::clamp<int64_t>(backoff_ms * 2, 10, 1000);
      std::unique_lock<std::mutex> l(run_mu_);
      run_cv_.wait_for(l, std::chrono::milliseconds(backoff_ms), [&] { return stopping_.load(); });
      continue;
    }
    if (!st.ok()) {
      TOKIMQ_LOG_ERROR("timerstore service {}: {}", which, st.ToString());
      std::lock_guard<std::mutex> l(run_mu_);
      if (bg_status_.ok()) bg_status_ = st;
    }
    if (backoff_ms > 0 && st.ok() && n > 0) {
      backoff_ms = 0;
      NoteWritesSucceed();
    }
    if (n > 0) continue;
    if (which == 0) {
      WaitForEnqueueWork();
    } else if (which == 1) {
      // Slots are walked a tick ahead: a few ms late costs nothing. Nothing else moves the
      // next walk earlier, so the cap is only for Stop (a manual clock wakes it on advances).
      clock_->WaitUntilMs(wake_ms, std::chrono::milliseconds(20));
    } else if (which == 2 || put_queue_full) {
      // Dequeue put waits for loaded copies; dequeue read, with put_queue_ full, for room.
      // Short real-time cap so Stop() is noticed quickly.
      std::unique_lock<std::mutex> l(mu_);
      // While backing off after a transient error, the wait runs out its cap instead.
      put_cv_.wait_for(l, std::chrono::milliseconds(which == 2 ? 20 : 1), [&] {
        return which == 2 ? !put_queue_.empty() && clock_->NowMs() >= retry_at_ms_
                          : put_queue_.size() < kPutQueueCap;
      });
    } else {
      std::unique_lock<std::mutex> l(mu_);
      WaitForDueLocked(l);
    }
  }
}

void TimerStoreImpl::WaitForEnqueueWork() {
  std::unique_lock<std::mutex> l(run_mu_);
  // A put that asked for a wake while the steps ran (after they read the queue's end) is not
  // lost: its kick is seen here. Puts that did not ask are found by the next poll.
  if (!enqueue_kick_ && !stopping_) {
    enqueue_sleeping_ = true;
    enqueue_cv_.wait_for(l, std::chrono::milliseconds(kEnqueuePollMs),
                         [this] { return enqueue_kick_ || stopping_; });
    enqueue_sleeping_ = false;
  }
  enqueue_kick_ = false;
}

void TimerStoreImpl::WaitForDueLocked(std::unique_lock<std::mutex>& l) {
  // Backing off after a transient error: not before retry_at_ms_.
  const int64_t due = std::max(fine_.NextDueMs(), retry_at_ms_);
  if (clock_->IsManual()) {
    // Manual clock: its own wait wakes on every advance; the 1 ms real-time cap covers units
    // loaded meanwhile.
    l.unlock();
    clock_->WaitUntilMs(due, std::chrono::milliseconds(1));
    l.lock();
    return;
  }
  // No polling while idle: it used to wake every millisecond (~1000 context switches a
  // second, ~7 % of broker CPU under a lease-only load, perf).
  constexpr int64_t kCapUs = 100'000;
  const int64_t now_us = clock_->NowMicros();
  int64_t wait_us = kCapUs;
  if (due < (INT64_MAX - kCapUs) / 1000) wait_us = std::min(kCapUs, due * 1000 - now_us);
  if (wait_us <= 0) return;
  read_wake_ms_ = due;
  read_cv_.wait_for(l, std::chrono::microseconds(wait_us));
  read_wake_ms_ = INT64_MIN;
}

void TimerStoreImpl::SetThreadNice(int nice, bool report) {
  errno = 0;
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice) != 0 && report) {
    TOKIMQ_LOG_WARN(
        "timerstore: cannot set the timer threads' nice value to {} ({}); they run "
        "at the process's priority",
        nice, std::strerror(errno));
  }
}

absl::Status TimerStoreImpl::Start() {
  std::lock_guard<std::mutex> l(run_mu_);
  if (!threads_.empty()) return absl::FailedPreconditionError("timerstore: already started");
  stopping_ = false;
  // Dequeue read and dequeue put on threads of their own: decoding/rewriting loaded copies
  // overlaps with encoding/appending them to the real topics (a hot second is CPU-bound).
  // Start returns once the service threads (and the checkpointer) have their priority.
  // 0 enqueue (get + put), 1 dequeue get (slot walks), 2 dequeue put, 3 dequeue read.
  std::latch ready(5);
  for (int i = 0; i < 4; ++i) {
    threads_.emplace_back([this, i, &ready] {
      if (options_.service_nice != 0) SetThreadNice(options_.service_nice, i == 0);
      // Dequeue put (2) and read (3) release messages at their millisecond: realtime within a
      // CPU budget (realtime_budget.h).
      RealtimeThread realtime(i >= 2 ? options_.service_realtime_priority : 0, clock_);
      realtime.Update();
      ready.count_down();
      WorkerLoop(i, &realtime);
    });
  }
  // Checkpoints (fsyncs) on their own thread so they never hold up delivery. Same nice value:
  // it takes mu_ for its snapshot, and a holder preempted by request handling would hold up
  // the dequeue threads.
  threads_.emplace_back([this, &ready] {
    if (options_.service_nice != 0) SetThreadNice(options_.service_nice, false);
    ready.count_down();
    CheckpointLoop();
  });
  ready.wait();
  return absl::OkStatus();
}

absl::Status TimerStoreImpl::Stop() {
  {
    std::lock_guard<std::mutex> l(run_mu_);
    stopping_ = true;
  }
  run_cv_.notify_all();
  enqueue_cv_.notify_all();
  put_cv_.notify_all();
  read_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  TOKIMQ_RETURN_IF_ERROR(Checkpoint());
  std::lock_guard<std::mutex> l(run_mu_);
  return bg_status_;
}

}  // namespace tokimq
