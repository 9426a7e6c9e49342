#include "client/ordering/ordered_batch.h"

#include <algorithm>
#include <map>

#include "client/ordering/properties.h"
#include "common/property_keys.h"

namespace tokimq::ordering {

OrderedBatch::OrderedBatch(client::SimpleConsumer* consumer,
                           std::vector<client::ReceivedMessage> messages)
    : consumer_(consumer), messages_(std::move(messages)) {
  const size_t n = messages_.size();
  headers_.resize(n);
  header_errors_.resize(n);
  groups_.resize(n);
  done_.assign(n, false);
  settled_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const client::ReceivedMessage& m = messages_[i];
    auto g = m.properties.find(prop::kMessageGroup);
    groups_[i] = g != m.properties.end() ? g->second : m.key;
    PlanRecord h{HashOrderingKey(groups_[i]), kUnorderedTag, EventAtomicOrdering::AcqRel};
    absl::StatusOr<PlanRecord> decoded = DecodeOrderingProperties(m.properties);
    if (decoded.ok()) {
      h.tag = decoded->tag;
      h.ordering = decoded->ordering;
    } else if (!absl::IsNotFound(decoded.status())) {
      header_errors_[i] = decoded.status();  // planned as a barrier; its decode fails
    }
    headers_[i] = h;
    key_records_[h.key].push_back(i);
  }
  for (const auto& [key, records] : key_records_) key_pending_[key] = records.size();
}

absl::Status OrderedBatch::AckLocked(const std::vector<size_t>& indexes) {
  if (indexes.empty()) return absl::OkStatus();
  std::vector<std::string> handles;
  handles.reserve(indexes.size());
  for (size_t i : indexes) handles.push_back(messages_[i].receipt_handle);
  absl::StatusOr<std::vector<absl::Status>> results = consumer_->AckBatch(handles);
  if (!results.ok()) return results.status();  // transport: Settle tries again
  for (size_t j = 0; j < indexes.size(); ++j) {
    settled_[indexes[j]] = true;
    if ((*results)[j].ok()) {
      ++acked_;
    } else {
      ++stale_acks_;  // the lease had ended: the broker hands the message out again
    }
  }
  return absl::OkStatus();
}

absl::Status OrderedBatch::MarkDone(std::span<const size_t> records) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> completed;
  for (size_t i : records) {
    if (done_[i]) continue;
    done_[i] = true;
    const uint64_t key = headers_[i].key;
    if (--key_pending_[key] == 0) completed.push_back(key);
  }
  std::vector<size_t> ack;
  for (uint64_t key : completed) {
    for (size_t i : key_records_[key]) {
      if (!settled_[i]) ack.push_back(i);
    }
  }
  return AckLocked(ack);
}

size_t OrderedBatch::Renew(int64_t invisible_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t renewed = 0;
  for (size_t i = 0; i < messages_.size(); ++i) {
    if (settled_[i]) continue;
    absl::StatusOr<std::string> handle =
        consumer_->ChangeInvisibleDuration(messages_[i].receipt_handle, invisible_ms);
    if (handle.ok()) {
      messages_[i].receipt_handle = std::move(*handle);
      ++renewed;
    } else if (absl::IsFailedPrecondition(handle.status())) {
      settled_[i] = true;  // lease lost (expired, or returned by an earlier one's expiry)
    }
  }
  renewals_ += renewed;
  return renewed;
}

void OrderedBatch::Settle(std::optional<int64_t> nack_delay_ms, BatchReport* report) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> ack;
  // Per message group, the lowest-offset record not done.
  std::map<std::string, size_t> first_not_done;
  for (size_t i = 0; i < messages_.size(); ++i) {
    if (settled_[i]) continue;
    if (done_[i]) {
      ack.push_back(i);
      continue;
    }
    auto [it, fresh] = first_not_done.try_emplace(groups_[i], i);
    if (!fresh && messages_[i].queue_offset < messages_[it->second].queue_offset) it->second = i;
  }
  // ACKs before NACKs: a NACK returns the group's later leased messages, done or not.
  if (!AckLocked(ack).ok()) stale_acks_ += ack.size();  // transport failure: they come back
  for (const auto& [group, i] : first_not_done) {
    if (consumer_->Nack(messages_[i].receipt_handle, nack_delay_ms).ok()) ++report->nacked;
  }
  for (size_t i = 0; i < messages_.size(); ++i) settled_[i] = true;
  report->acked += acked_;
  report->stale_acks += stale_acks_;
  report->renewals += renewals_;
}

}  // namespace tokimq::ordering
