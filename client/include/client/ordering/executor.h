// Executes a Plan (plan.h): keys concurrently on a bounded thread pool, a key's segments strictly
// in order, per segment head -> body runs concurrently -> tail. Each run is decoded by a user
// function, reduced by its type's algebra and handed to the handler in chunks of at most
// max_batch reduced events; one handler call sees one key and one type.
//
// Failure: when a decode or handler call fails, that key stops. Records whose handler call
// succeeded are Done; every other record of the key is NotDone (the failed run, sibling body
// runs that had not finished, later stages and segments). The consumer ACKs exactly the Done
// records, so NotDone ones come back through the retry path in order. Other keys go on.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/ordering/plan.h"

namespace tokimq::ordering {

struct ExecutorOptions {
  // Worker threads (>= 1). Keys whose handlers block on each other need at least that many
  // threads: a handler occupies its worker until it returns.
  size_t threads = 4;
  // Largest number of reduced events in one handler call (>= 1). MAX_BATCH of the ordering seed.
  size_t max_batch = 64;
};

enum class RecordOutcome : uint8_t {
  kNotDone = 0,  // not handled: do not ACK; it returns through the retry path
  kDone = 1,     // its handler call returned OK: ACK it
};

struct KeyFailure {
  uint64_t key;
  absl::Status status;  // the first failure of that key
};

struct ExecutionReport {
  std::vector<RecordOutcome> outcomes;  // one per batch record, by batch index
  std::vector<KeyFailure> failures;     // one per stopped key, in keys() order

  bool all_done() const { return failures.empty(); }
  std::vector<size_t> done() const { return Select(RecordOutcome::kDone); }
  std::vector<size_t> not_done() const { return Select(RecordOutcome::kNotDone); }

 private:
  std::vector<size_t> Select(RecordOutcome want) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i] == want) out.push_back(i);
    }
    return out;
  }
};

// One reduced event: a decoded event, or several merged by an associative type's combine, with
// the batch indexes it stands for (ascending).
template <typename Event>
struct ReducedEvent {
  Event event;
  std::vector<size_t> records;
};

// What the handler receives: events of one key and one type, in log order, at most max_batch.
template <typename Event>
struct HandlerCall {
  uint64_t key;
  EventTypeTag tag;
  std::span<const ReducedEvent<Event>> events;
};

// A type's algebra. Without `combine` the type is non-associative: events are passed through one
// by one. With `combine` the type is associative: combine(acc, next) is offered each next event
// of the run in log order and returns true if it merged `next` into `acc` (e.g. deposits summed),
// false to keep `next` as a separate event.
template <typename Event>
struct TypeAlgebra {
  std::function<bool(Event& acc, const Event& next)> combine;
};

namespace internal {

// Per-run view handed to the run function by ExecutorCore.
class RunContext {
 public:
  RunContext(RecordOutcome* outcomes, const std::atomic<bool>* key_stopped)
      : outcomes_(outcomes), key_stopped_(key_stopped) {}
  // True once another run of the same key failed: stop before the next handler call.
  bool key_stopped() const { return key_stopped_->load(std::memory_order_acquire); }
  void MarkDone(std::span<const size_t> records) {
    for (size_t i : records) outcomes_[i] = RecordOutcome::kDone;
  }

 private:
  RecordOutcome* outcomes_;
  const std::atomic<bool>* key_stopped_;
};

// The type-independent scheduler: owns the worker threads and walks a plan, calling `run_fn`
// once per run when the run's stage is reached. Scheduling is continuation based: no worker ever
// waits for another task, so keys never wait on each other. Execute may be called from several
// threads at once (each call has its own state); it must not be called from a worker thread.
class ExecutorCore {
 public:
  using RunFn = std::function<absl::Status(RunId run, RunContext& context)>;

  explicit ExecutorCore(size_t threads);
  ~ExecutorCore();
  ExecutorCore(const ExecutorCore&) = delete;
  ExecutorCore& operator=(const ExecutorCore&) = delete;

  // Blocks until every key finished or stopped.
  ExecutionReport Execute(const Plan& plan, const RunFn& run_fn);

 private:
  class Pool;
  struct Execution;
  std::unique_ptr<Pool> pool_;
};

}  // namespace internal

// Typed executor. Owns its worker threads (joined in the destructor).
//
// Thread-safety: RegisterType before the first Execute, not concurrently with it. Execute may run
// concurrently from several caller threads. The decode function and the handler are called from
// worker threads, concurrently for different runs (never concurrently within one run), and must
// be thread-safe for that; they must not throw (an exception is turned into an Internal error for
// that key, but do not rely on it).
template <typename Event>
class Executor {
 public:
  // Decodes batch record `index` (reads the body; the planner never does).
  using DecodeFn = std::function<absl::StatusOr<Event>(size_t index)>;
  using HandlerFn = std::function<absl::Status(const HandlerCall<Event>& call)>;

  Executor(ExecutorOptions options, HandlerFn handler)
      : options_(options), handler_(std::move(handler)), core_(options.threads) {
    if (options_.max_batch == 0) options_.max_batch = 1;
  }

  // Associative types must be registered; unregistered types are passed through.
  void RegisterType(EventTypeTag tag, TypeAlgebra<Event> algebra) {
    algebras_[tag] = std::move(algebra);
  }

  // Runs `plan` over a batch whose records `decode` can read.
  ExecutionReport Execute(const Plan& plan, const DecodeFn& decode) {
    return core_.Execute(plan, [&](RunId run, internal::RunContext& context) {
      return RunOne(plan, run, decode, context);
    });
  }

  // Plans `headers` (the batch's ordering headers) and runs the plan.
  ExecutionReport Execute(std::span<const PlanRecord> headers, const DecodeFn& decode) {
    const Plan plan = Plan::New(headers);
    return Execute(plan, decode);
  }

 private:
  absl::Status RunOne(const Plan& plan, RunId run, const DecodeFn& decode,
                      internal::RunContext& context) {
    const EventTypeTag tag = plan.tag(run);
    const std::span<const size_t> records = plan.records(run);
    // Decode the whole run first: a body that cannot be decoded fails the run before any
    // handler side effect.
    std::vector<ReducedEvent<Event>> events;
    events.reserve(records.size());
    const TypeAlgebra<Event>* algebra = nullptr;
    if (auto it = algebras_.find(tag); it != algebras_.end() && it->second.combine) {
      algebra = &it->second;
    }
    for (size_t index : records) {
      absl::StatusOr<Event> decoded = decode(index);
      if (!decoded.ok()) return decoded.status();
      if (algebra != nullptr && !events.empty() &&
          algebra->combine(events.back().event, *decoded)) {
        events.back().records.push_back(index);
        continue;
      }
      events.push_back(ReducedEvent<Event>{std::move(*decoded), {index}});
    }
    const std::span<const ReducedEvent<Event>> all(events);
    for (size_t begin = 0; begin < all.size(); begin += options_.max_batch) {
      if (context.key_stopped()) return absl::OkStatus();
      const auto chunk = all.subspan(begin, std::min(options_.max_batch, all.size() - begin));
      absl::Status status = handler_(HandlerCall<Event>{plan.key(run), tag, chunk});
      if (!status.ok()) return status;
      for (const ReducedEvent<Event>& e : chunk) context.MarkDone(e.records);
    }
    return absl::OkStatus();
  }

  ExecutorOptions options_;
  HandlerFn handler_;
  std::map<EventTypeTag, TypeAlgebra<Event>> algebras_;
  internal::ExecutorCore core_;
};

}  // namespace tokimq::ordering
