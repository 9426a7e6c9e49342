// OrderBook: the in-memory state of every order of a run, kept in step with the OrderLog.
//
// Each order is NONE -> CREATED -> (PAID | CANCELLED); PAID and CANCELLED are final and exclusive.
// The check-and-set of a state and the Append of its record happen under the order's stripe
// lock, so a payment and a cancellation of the same order are serialised: exactly one wins.
// A caller that acts on a state (e.g. ACKs a timeout message because the order is paid) must
// first make that state durable: every operation returns the sequence number of the record that
// established the state it reports, to pass to OrderLog::Sync.
//
// Ownership: borrows the OrderLog (must outlive the book). Thread-safety: all methods except
// Replay may be called from any thread; Replay is for recovery, before any other call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "order_timeout/order_log.h"

namespace tokimq::order_timeout {

enum class OrderState : uint8_t { kNone = 0, kCreated = 1, kPaid = 2, kCancelled = 3 };

enum class PayResult { kPaid, kAlreadyPaid, kCancelled, kUnknown };
enum class CancelResult { kCancelled, kAlreadyCancelled, kPaid, kNotDue, kUnknown };

struct BookCounts {
  uint64_t created = 0;
  uint64_t sent = 0;
  uint64_t paid = 0;
  uint64_t cancelled = 0;
};

class OrderBook {
 public:
  // `log` may be null until AttachLog (recovery replays first, then attaches).
  OrderBook(uint64_t orders, OrderLog* log);

  // Recovery: applies one replayed record (no locking, no logging).
  void Replay(const OrderRecord& rec);
  void AttachLog(OrderLog* log) { log_ = log; }

  uint64_t orders() const { return states_.size(); }

  // NONE -> CREATED with `deadline_ms`. Returns the record's sequence (0 if already created).
  uint64_t Create(uint64_t id, int64_t deadline_ms, int64_t now_ms);
  // Notes that the order's timeout message is stored by the broker (no durability needed: a lost
  // SENT record only means the message is sent again on --resume).
  void MarkSent(uint64_t id, int64_t now_ms);
  // CREATED -> PAID. *seq: the record to sync before relying on the result.
  PayResult Pay(uint64_t id, int64_t now_ms, uint64_t* seq);
  // CREATED -> CANCELLED if now_ms >= deadline; kNotDue (state unchanged) before it.
  CancelResult CancelIfDue(uint64_t id, int64_t now_ms, uint64_t* seq);

  OrderState state(uint64_t id) const;
  int64_t deadline(uint64_t id) const;
  bool sent(uint64_t id) const;
  BookCounts counts() const;

 private:
  static constexpr size_t kStripes = 1024;
  std::mutex& StripeFor(uint64_t id) const { return stripes_[id % kStripes]; }
  uint64_t Log(OrderEvent event, uint64_t id, int64_t time_ms);

  OrderLog* log_;
  mutable std::unique_ptr<std::mutex[]> stripes_;
  // Indexed by order id; guarded by the order's stripe.
  std::vector<OrderState> states_;
  std::vector<uint8_t> sent_;
  std::vector<int64_t> deadlines_;
  std::vector<uint64_t> last_seq_;
  std::atomic<uint64_t> created_{0}, sent_count_{0}, paid_{0}, cancelled_{0};
};

}  // namespace tokimq::order_timeout
