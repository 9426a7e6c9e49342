#include "order_timeout/order_book.h"

namespace tokimq::order_timeout {

OrderBook::OrderBook(uint64_t orders, OrderLog* log)
    : log_(log),
      stripes_(new std::mutex[kStripes]),
      states_(orders, OrderState::kNone),
      sent_(orders, 0),
      deadlines_(orders, 0),
      last_seq_(orders, 0) {}

void OrderBook::Replay(const OrderRecord& rec) {
  const uint64_t id = rec.order_id;
  if (id >= states_.size()) return;
  switch (rec.event) {
    case OrderEvent::kCreated:
      if (states_[id] == OrderState::kNone) {
        states_[id] = OrderState::kCreated;
        deadlines_[id] = rec.time_ms;
        created_.fetch_add(1);
      }
      break;
    case OrderEvent::kSent:
      if (!sent_[id]) {
        sent_[id] = 1;
        sent_count_.fetch_add(1);
      }
      break;
    case OrderEvent::kPaid:
      if (states_[id] == OrderState::kCreated) {
        states_[id] = OrderState::kPaid;
        paid_.fetch_add(1);
      }
      break;
    case OrderEvent::kCancelled:
      if (states_[id] == OrderState::kCreated) {
        states_[id] = OrderState::kCancelled;
        cancelled_.fetch_add(1);
      }
      break;
  }
}

uint64_t OrderBook::Log(OrderEvent event, uint64_t id, int64_t time_ms) {
  return log_->Append(OrderRecord{event, id, time_ms});
}

uint64_t OrderBook::Create(uint64_t id, int64_t deadline_ms, int64_t now_ms) {
  if (id >= states_.size()) return 0;
  std::lock_guard<std::mutex> lock(StripeFor(id));
  if (states_[id] != OrderState::kNone) return 0;
  states_[id] = OrderState::kCreated;
  deadlines_[id] = deadline_ms;
  last_seq_[id] = Log(OrderEvent::kCreated, id, deadline_ms);
  created_.fetch_add(1);
  return last_seq_[id];
}

void OrderBook::MarkSent(uint64_t id, int64_t now_ms) {
  if (id >= states_.size()) return;
  std::lock_guard<std::mutex> lock(StripeFor(id));
  if (sent_[id]) return;
  sent_[id] = 1;
  sent_count_.fetch_add(1);
  // Not recorded in last_seq_: nothing waits for it.
  Log(OrderEvent::kSent, id, now_ms);
}

PayResult OrderBook::Pay(uint64_t id, int64_t now_ms, uint64_t* seq) {
  *seq = 0;
  if (id >= states_.size()) return PayResult::kUnknown;
  std::lock_guard<std::mutex> lock(StripeFor(id));
  *seq = last_seq_[id];
  switch (states_[id]) {
    case OrderState::kNone:
      return PayResult::kUnknown;
    case OrderState::kPaid:
      return PayResult::kAlreadyPaid;
    case OrderState::kCancelled:
      return PayResult::kCancelled;
    case OrderState::kCreated:
      break;
  }
  states_[id] = OrderState::kPaid;
  last_seq_[id] = *seq = Log(OrderEvent::kPaid, id, now_ms);
  paid_.fetch_add(1);
  return PayResult::kPaid;
}

CancelResult OrderBook::CancelIfDue(uint64_t id, int64_t now_ms, uint64_t* seq) {
  *seq = 0;
  if (id >= states_.size()) return CancelResult::kUnknown;
  std::lock_guard<std::mutex> lock(StripeFor(id));
  *seq = last_seq_[id];
  switch (states_[id]) {
    case OrderState::kNone:
      return CancelResult::kUnknown;
    case OrderState::kPaid:
      return CancelResult::kPaid;
    case OrderState::kCancelled:
      return CancelResult::kAlreadyCancelled;
    case OrderState::kCreated:
      break;
  }
  if (now_ms < deadlines_[id]) return CancelResult::kNotDue;
  states_[id] = OrderState::kCancelled;
  last_seq_[id] = *seq = Log(OrderEvent::kCancelled, id, now_ms);
  cancelled_.fetch_add(1);
  return CancelResult::kCancelled;
}

OrderState OrderBook::state(uint64_t id) const {
  if (id >= states_.size()) return OrderState::kNone;
  std::lock_guard<std::mutex> lock(StripeFor(id));
  return states_[id];
}

int64_t OrderBook::deadline(uint64_t id) const {
  if (id >= states_.size()) return 0;
  std::lock_guard<std::mutex> lock(StripeFor(id));
  return deadlines_[id];
}

bool OrderBook::sent(uint64_t id) const {
  if (id >= states_.size()) return false;
  std::lock_guard<std::mutex> lock(StripeFor(id));
  return sent_[id] != 0;
}

BookCounts OrderBook::counts() const {
  return BookCounts{created_.load(), sent_count_.load(), paid_.load(), cancelled_.load()};
}

}  // namespace tokimq::order_timeout
