// RetentionTask: the broker's periodic CommitLog retention. Every `interval_ms` of clock time it
// asks the AgeFn for the retention age and calls MessageStore::DeleteExpired with it, which
// first lets the TimerStore move the pending timer messages of the expired segments to the
// CommitLog head (its retention hook: a message delayed beyond the retention age is still
// delivered, once, without keeping its segment), then deletes whole CommitLog segments older
// than that age except what is still pinned. ConsumeQueue entries of deleted records are
// skipped by readers. Rules and the choice of age: docs/operations.md "Retention".
//
// Time: only through the Clock. On a ManualClock the task wakes as soon as the clock is moved
// past the next run time (so AdvanceClock in black-box tests triggers a run at once).
// Ownership: borrows the Clock and the MessageStore; both must outlive the task (Stop() first).
// Thread-safety: Start/Stop from one owner thread; RunOnce and the getters from any thread
// (runs are serialised).
// Durability: DeleteExpired syncs the CommitLog directory after deleting; a crash in the middle
// leaves some expired segments to the next run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"

namespace tokimq {
class Clock;
class MessageStore;
}  // namespace tokimq

namespace tokimq::broker {

class RetentionTask {
 public:
  // Returns the retention age in ms at the time of a run (<= 0: the run deletes nothing).
  using AgeFn = std::function<int64_t()>;

  // interval_ms <= 0 disables the background thread (RunOnce still works).
  RetentionTask(Clock* clock, MessageStore* store, int64_t interval_ms, AgeFn age);
  ~RetentionTask();
  RetentionTask(const RetentionTask&) = delete;
  RetentionTask& operator=(const RetentionTask&) = delete;

  // Starts the background thread; the first run is one interval after Start.
  void Start();
  // Stops and joins the thread (a run in progress finishes first). Idempotent.
  void Stop();

  // One retention pass now. Returns the number of CommitLog segments deleted.
  absl::StatusOr<int> RunOnce();

  int64_t runs() const { return runs_.load(std::memory_order_acquire); }
  int64_t deleted_segments() const { return deleted_.load(std::memory_order_acquire); }
  int64_t last_run_ms() const { return last_run_ms_.load(std::memory_order_acquire); }
  int64_t last_age_ms() const { return last_age_ms_.load(std::memory_order_acquire); }

 private:
  void Loop();

  Clock* const clock_;
  MessageStore* const store_;
  const int64_t interval_ms_;
  const AgeFn age_;

  std::mutex run_mu_;  // serialises RunOnce
  std::atomic<int64_t> runs_{0};
  std::atomic<int64_t> deleted_{0};
  std::atomic<int64_t> last_run_ms_{0};  // clock time of the last completed run
  std::atomic<int64_t> last_age_ms_{0};

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tokimq::broker
