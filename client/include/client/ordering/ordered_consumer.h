// OrderedConsumer: consumes a FIFO topic in batches through the planner and the executor
// (issue 23; docs/ordering.md "Ordered consumer"). Each poll receives up to max_messages
// messages with up to max_per_group consecutive messages per message group (the broker's
// "Batches per message group"), plans them by their ordering headers (OrderedBatch: the message
// group is the key; ORD_TAG, ORD_MODE), runs the plan with the registered handler and algebras,
// ACKs each key's messages as soon as the key is done, renews the leases of what still runs,
// and at the end NACKs the first not-done message of each failed group (its successors come
// back behind it, in order) and reports the batch.
//
// Concurrency: `pollers` batches may be in flight at once, each on an Executor of its own
// (ExecutorOptions::threads workers each). Batches never share a message group (the broker
// blocks a group until its run is settled), so a slow or failing key holds only its own
// batch's poller; the other pollers keep receiving. A renewer thread renews every in-flight
// batch every renew_every_ms (real time).
//
// Delivery: at least once. A message whose lease ended before its ACK (BatchReport::stale_acks)
// is handed out again: handlers must be idempotent (e.g. record processed message ids in the
// same transaction as the effect, as examples/accounts does).
//
// Thread-safety: RegisterType before Start/PollOnce. PollOnce from one thread at a time (it uses
// poller 0); Start/Stop from one controlling thread. The handler and decode are called from
// worker threads, concurrently for different runs.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ordering/executor.h"
#include "client/ordering/ordered_batch.h"
#include "client/simple_consumer.h"

namespace tokimq::ordering {

struct OrderedConsumerOptions {
  std::string topic;              // a FIFO topic
  std::string tag_filter;         // "" or "*": all
  int max_messages = 64;          // per receive, 1..1024
  int max_per_group = 16;         // consecutive messages of one group per receive, 1..1024
  int64_t invisible_ms = 30'000;  // lease per message
  int64_t long_poll_ms = 1'000;
  int64_t renew_every_ms = 0;            // 0: invisible_ms / 3
  size_t pollers = 2;                    // batches in flight at once (Start)
  std::optional<int64_t> nack_delay_ms;  // nullopt: the consumer group's backoff
  ExecutorOptions executor;              // per poller
};

template <typename Event>
class OrderedConsumer {
 public:
  // Decodes one message's body into an event (called on workers; must be thread-safe).
  using DecodeFn = std::function<absl::StatusOr<Event>(const client::ReceivedMessage&)>;
  using HandlerFn = std::function<absl::Status(const HandlerCall<Event>&)>;
  // Called once per settled batch (from the poller's thread).
  using ReportFn = std::function<void(const BatchReport&)>;

  // `consumer` (its group is the consumer group) must outlive this object.
  OrderedConsumer(client::SimpleConsumer* consumer, OrderedConsumerOptions options, DecodeFn decode,
                  HandlerFn handler)
      : consumer_(consumer),
        options_(std::move(options)),
        decode_(std::move(decode)),
        handler_(std::move(handler)) {
    if (options_.pollers == 0) options_.pollers = 1;
    if (options_.renew_every_ms <= 0) {
      options_.renew_every_ms = std::max<int64_t>(options_.invisible_ms / 3, 1);
    }
    for (size_t i = 0; i < options_.pollers; ++i) {
      auto p = std::make_unique<Poller>();
      Poller* self = p.get();
      p->executor = std::make_unique<Executor<Event>>(
          options_.executor,
          [this, self](const HandlerCall<Event>& call) { return Handle(self, call); });
      pollers_.push_back(std::move(p));
    }
  }
  ~OrderedConsumer() { Stop(); }

  void RegisterType(EventTypeTag tag, TypeAlgebra<Event> algebra) {
    for (auto& p : pollers_) p->executor->RegisterType(tag, algebra);
  }

  // One batch on poller 0: receive (long poll), plan, execute, settle. An empty batch (nothing
  // within the long poll) reports records == 0. Errors: the Receive's.
  absl::StatusOr<BatchReport> PollOnce() { return Poll(pollers_[0].get()); }

  // Renews the leases of every batch in flight now (what the renewer thread does).
  size_t RenewNow() {
    std::lock_guard<std::mutex> lock(inflight_mu_);
    size_t n = 0;
    for (OrderedBatch* b : inflight_) n += b->Renew(options_.invisible_ms);
    return n;
  }

  // Starts `pollers` threads polling until Stop, and the renewer; `on_batch` gets every
  // non-empty batch's report.
  void Start(ReportFn on_batch) {
    stopping_ = false;
    on_batch_ = std::move(on_batch);
    for (auto& p : pollers_) {
      p->thread = std::thread([this, self = p.get()] {
        while (!stopping_.load()) {
          absl::StatusOr<BatchReport> r = Poll(self);
          if (r.ok() && r->records > 0 && on_batch_) on_batch_(*r);
        }
      });
    }
    renewer_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(stop_mu_);
      while (!stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.renew_every_ms),
                                [&] { return stopping_.load(); })) {
        lock.unlock();
        RenewNow();
        lock.lock();
      }
    });
  }
  // Ends polling after the batches in flight are settled (at most a long poll later).
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      stopping_ = true;
      stop_cv_.notify_all();
    }
    for (auto& p : pollers_) {
      if (p->thread.joinable()) p->thread.join();
    }
    if (renewer_.joinable()) renewer_.join();
  }

 private:
  struct Poller {
    std::unique_ptr<Executor<Event>> executor;
    std::thread thread;
    // The batch being executed and its handler figures (set by Poll, read by Handle).
    OrderedBatch* batch = nullptr;
    std::atomic<size_t> calls{0};
    std::atomic<size_t> events{0};
    std::atomic<size_t> ack_errors{0};
  };

  absl::Status Handle(Poller* p, const HandlerCall<Event>& call) {
    absl::Status s = handler_(call);
    if (!s.ok()) return s;
    p->calls.fetch_add(1);
    p->events.fetch_add(call.events.size());
    std::vector<size_t> records;
    for (const ReducedEvent<Event>& e : call.events) {
      records.insert(records.end(), e.records.begin(), e.records.end());
    }
    // Done: ACK now if that finished the key (errors: Settle ACKs again).
    if (!p->batch->MarkDone(records).ok()) p->ack_errors.fetch_add(1);
    return absl::OkStatus();
  }

  absl::StatusOr<BatchReport> Poll(Poller* p) {
    client::ReceiveOptions ro;
    ro.max_messages = options_.max_messages;
    ro.max_per_group = options_.max_per_group;
    ro.invisible_ms = options_.invisible_ms;
    ro.long_poll_ms = options_.long_poll_ms;
    ro.tag_filter = options_.tag_filter;
    absl::StatusOr<std::vector<client::ReceivedMessage>> got =
        consumer_->Receive(options_.topic, ro);
    if (!got.ok()) return got.status();
    BatchReport report;
    if (got->empty()) return report;
    OrderedBatch batch(consumer_, std::move(*got));
    report.records = batch.messages().size();
    p->batch = &batch;
    p->calls = 0;
    p->events = 0;
    {
      std::lock_guard<std::mutex> lock(inflight_mu_);
      inflight_.insert(&batch);
    }
    const Plan plan = Plan::New(batch.headers());
    report.keys = plan.keys().size();
    ExecutionReport exec = p->executor->Execute(plan, [&](size_t i) -> absl::StatusOr<Event> {
      if (!batch.header_error(i).ok()) return batch.header_error(i);
      return decode_(batch.messages()[i]);
    });
    {
      std::lock_guard<std::mutex> lock(inflight_mu_);
      inflight_.erase(&batch);
    }
    batch.Settle(options_.nack_delay_ms, &report);
    p->batch = nullptr;
    report.handler_calls = p->calls.load();
    report.events = p->events.load();
    report.failed_keys = exec.failures.size();
    for (const KeyFailure& f : exec.failures) report.failures.push_back(f.status);
    return report;
  }

  client::SimpleConsumer* const consumer_;
  OrderedConsumerOptions options_;
  DecodeFn decode_;
  HandlerFn handler_;
  std::vector<std::unique_ptr<Poller>> pollers_;
  ReportFn on_batch_;

  std::mutex inflight_mu_;  // inflight_; taken before an OrderedBatch's own mutex
  std::set<OrderedBatch*> inflight_;

  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  std::thread renewer_;
};

}  // namespace tokimq::ordering
