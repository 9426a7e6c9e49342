#include "client/ordering/executor.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace tokimq::ordering::internal {

// A fixed set of worker threads draining one FIFO queue. Tasks never block on other tasks (the
// scheduler is continuation based), so FIFO order plus >= 1 worker guarantees progress.
class ExecutorCore::Pool {
 public:
  explicit Pool(size_t threads) {
    if (threads == 0) threads = 1;
    workers_.reserve(threads);
    for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// State of one Execute call; lives on the caller's stack until every key has finished.
struct ExecutorCore::Execution {
  struct Key {
    uint64_t key = 0;
    std::span<const SegmentId> segments;
    size_t segment = 0;              // current segment (index into segments)
    int stage = -1;                  // 0 head, 1 body, 2 tail; -1 before the first
    std::atomic<size_t> pending{0};  // runs of the current stage still running
    std::atomic<bool> stopped{false};
    std::mutex mu;
    absl::Status status;  // first failure, guarded by mu
  };

  const Plan* plan = nullptr;
  const RunFn* run_fn = nullptr;
  Pool* pool = nullptr;
  std::vector<RecordOutcome> outcomes;
  std::vector<std::unique_ptr<Key>> keys;

  std::mutex mu;
  std::condition_variable all_finished;
  size_t remaining = 0;  // keys not finished, guarded by mu

  // Moves `key` to its next non-empty stage and posts that stage's runs, or finishes the key.
  // Called only when no run of `key` is in flight.
  void Advance(Key& key) {
    std::vector<RunId> runs;
    while (runs.empty()) {
      if (++key.stage > 2) {
        key.stage = 0;
        ++key.segment;
      }
      if (key.segment >= key.segments.size()) {
        Finish();
        return;
      }
      const SegmentId seg = key.segments[key.segment];
      if (key.stage == 0) {
        if (auto h = plan->head(seg)) runs.push_back(*h);
      } else if (key.stage == 1) {
        const auto body = plan->body(seg);
        runs.assign(body.begin(), body.end());
      } else {
        if (auto t = plan->tail(seg)) runs.push_back(*t);
      }
    }
    key.pending.store(runs.size(), std::memory_order_release);
    for (RunId run : runs) {
      pool->Post([this, &key, run] { RunTask(key, run); });
    }
  }

  void RunTask(Key& key, RunId run) {
    {
      // Scoped: every local that could share state with the caller (the Status rep) must be
      // gone before the last decrement below, after which Execute may return.
      absl::Status status;
      if (!key.stopped.load(std::memory_order_acquire)) {
        RunContext context(outcomes.data(), &key.stopped);
        try {
          status = (*run_fn)(run, context);
        } catch (const std::exception& e) {
          status = absl::InternalError(std::string("ordering handler threw: ") + e.what());
        } catch (...) {
          status = absl::InternalError("ordering handler threw a non-std exception");
        }
      }
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(key.mu);
        if (key.status.ok()) key.status = std::move(status);
        key.stopped.store(true, std::memory_order_release);
      }
    }
    if (key.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (key.stopped.load(std::memory_order_acquire)) {
        Finish();
      } else {
        Advance(key);
      }
    }
  }

  void Finish() {
    std::lock_guard<std::mutex> lock(mu);
    if (--remaining == 0) all_finished.notify_all();
  }
};

ExecutorCore::ExecutorCore(size_t threads) : pool_(std::make_unique<Pool>(threads)) {}

ExecutorCore::~ExecutorCore() = default;

ExecutionReport ExecutorCore::Execute(const Plan& plan, const RunFn& run_fn) {
  Execution exec;
  exec.plan = &plan;
  exec.run_fn = &run_fn;
  exec.pool = pool_.get();
  exec.outcomes.assign(plan.record_count(), RecordOutcome::kNotDone);
  for (uint64_t key : plan.keys()) {
    auto k = std::make_unique<Execution::Key>();
    k->key = key;
    k->segments = plan.segments(key);
    exec.keys.push_back(std::move(k));
  }
  exec.remaining = exec.keys.size();
  for (auto& k : exec.keys) exec.Advance(*k);
  {
    std::unique_lock<std::mutex> lock(exec.mu);
    exec.all_finished.wait(lock, [&] { return exec.remaining == 0; });
  }
  ExecutionReport report;
  report.outcomes = std::move(exec.outcomes);
  for (auto& k : exec.keys) {
    std::lock_guard<std::mutex> lock(k->mu);
    if (!k->status.ok()) report.failures.push_back(KeyFailure{k->key, k->status});
  }
  return report;
}

}  // namespace tokimq::ordering::internal
