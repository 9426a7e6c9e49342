#include "failover/history.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "fmt/format.h"

namespace tokimq::testing {

void History::Attempt(const std::string& id, int64_t deliver_at_min_ms) {
  std::lock_guard<std::mutex> l(mu_);
  Message& m = messages_[id];
  if (!m.attempted) m.deliver_at_min_ms = deliver_at_min_ms;
  m.attempted = true;
}

void History::SendOk(const std::string& id, int64_t deliver_at_ms) {
  std::lock_guard<std::mutex> l(mu_);
  Message& m = messages_[id];
  if (m.acknowledged) return;
  m.acknowledged = true;
  m.deliver_at_ms = deliver_at_ms;
  m.ack_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  if (!m.received()) ++outstanding_;
}

void History::Received(const std::string& id, const std::string& group, int32_t queue_id,
                       int64_t queue_offset, int64_t at_ms, int delivery_attempt,
                       const std::string& source) {
  std::lock_guard<std::mutex> l(mu_);
  Message& m = messages_[id];
  if (!m.received() && m.acknowledged) --outstanding_;
  if (delivery_attempt > 1) {
    ++m.retry_receipts;
  } else {
    Message::Copy& c = m.copies[{group, queue_id, queue_offset}];
    if (c.receipts++ == 0) {
      c.first_ms = at_ms;
      c.source = source;
    }
  }
  m.earliest_receipt_ms =
      m.earliest_receipt_ms < 0 ? at_ms : std::min(m.earliest_receipt_ms, at_ms);
}

void History::Acked(const std::string& /*id*/, bool /*ok*/) {
  // Kept for completeness of the record; the guarantees do not depend on consumer acks.
}

int64_t History::Outstanding() const {
  std::lock_guard<std::mutex> l(mu_);
  return outstanding_;
}

int64_t History::ReceiptsFrom(const std::string& group) const {
  std::lock_guard<std::mutex> l(mu_);
  int64_t n = 0;
  for (const auto& [id, m] : messages_) {
    for (const auto& [pos, c] : m.copies) {
      if (std::get<0>(pos) == group) n += c.receipts;
    }
  }
  return n;
}

History::Report History::Check() const {
  std::lock_guard<std::mutex> l(mu_);
  Report r;
  for (const auto& [id, m] : messages_) {
    if (m.attempted) ++r.attempted;
    if (m.acknowledged) ++r.acknowledged;
    if (m.received()) ++r.received_ids;
    int receipts = m.retry_receipts;
    r.redelivered += m.retry_receipts;
    for (const auto& [pos, c] : m.copies) {
      receipts += c.receipts;
      r.redelivered += c.receipts - 1;
    }
    r.receipts += receipts;
    if (m.copies.size() > 1) {
      std::set<std::string> sources;
      bool known = true;
      for (const auto& [pos, c] : m.copies) {
        known = known && !c.source.empty();
        sources.insert(c.source);
      }
      const auto extra = static_cast<int64_t>(m.copies.size()) - 1;
      // Unknown sources: every extra copy counts against the timer (the stricter reading).
      const int64_t sends = known ? static_cast<int64_t>(sources.size()) - 1 : 0;
      r.send_duplicates += sends;
      r.timer_duplicates += extra - sends;
    }
    if (m.copies.size() > 1 && r.duplicate_examples.size() < 10) {
      std::string e = id + ":";
      for (const auto& [pos, c] : m.copies) {
        e += fmt::format(" {}/{}@{} at {} from {}", std::get<0>(pos), std::get<1>(pos),
                       std::get<2>(pos), c.first_ms, c.source.empty() ? "?" : c.source);
      }
      r.duplicate_examples.push_back(std::move(e));
    }
    if (!m.attempted && m.received()) {
      ++r.phantom;
      continue;
    }
    if (m.acknowledged && !m.received()) {
      ++r.lost;
      if (r.lost_ids.size() < 10) r.lost_ids.push_back(id);
      r.lost_ack_ms.push_back(m.ack_ms);
    }
    if (!m.acknowledged && m.received()) ++r.indeterminate_received;
    if (m.received() && m.earliest_receipt_ms < m.deliver_at_min_ms) {
      ++r.early;
      if (r.early_ids.size() < 10) {
        r.early_ids.push_back(
            fmt::format("{} ({} ms early)", id, m.deliver_at_min_ms - m.earliest_receipt_ms));
      }
    }
  }
  return r;
}

std::string History::Report::ToString() const {
  return fmt::format(
      "attempted {} acknowledged {} received {} ids / {} receipts; lost {} early {} "
      "timer-duplicates {} send-duplicates {} redelivered {} phantom {} (unacknowledged but "
      "stored {}){}{}{}",
      attempted, acknowledged, received_ids, receipts, lost, early, timer_duplicates,
      send_duplicates, redelivered, phantom, indeterminate_received,
      lost_ids.empty() ? "" : fmt::format("; lost e.g. {}", fmt::join(lost_ids, ",")),
      early_ids.empty() ? "" : fmt::format("; early e.g. {}", fmt::join(early_ids, ",")),
      duplicate_examples.empty()
          ? ""
          : fmt::format("; duplicated e.g. {}", fmt::join(duplicate_examples, "; ")));
}

}  // namespace tokimq::testing
