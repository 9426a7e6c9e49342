// OrderedBatch: one received batch of a FIFO topic on its way through the planner (issue 23):
// the ordering headers of its messages, its leases (renewed while it executes) and how it is
// settled with the broker (ACK what is done, NACK the first not-done message of each message
// group). The type-independent half of OrderedConsumer (ordered_consumer.h).
//
// Keys: the message group (property MSG_GROUP) is the plan key, HashOrderingKey(group), since
// the group is what the broker orders and blocks (docs/ordering.md "Batches per message group");
// ORD_KEY is not consulted. ORD_TAG and ORD_MODE give the type and ordering. A message without
// the ordering properties is an AcqRel barrier of tag kUnorderedTag (nothing of its group
// crosses it); one whose properties are malformed fails to decode (its key stops there, the
// message is NACKed and ends in the DLQ after the group's max attempts).
//
// Settling (Settle): every done message not yet ACKed is ACKed first (one AckBatch), then per
// message group the lowest-offset not-done message is NACKed; the broker returns it and every
// later message of the group still leased, in order, and the ACKed ones stay ACKed. A key
// whose records are all done is ACKed as soon as its last handler call returns (AckIfKeyDone),
// so a slow key of the batch does not keep the others' groups blocked at the broker.
//
// Thread-safety: every method may be called from any thread (one mutex; broker calls are made
// under it, so renewals and ACKs of one batch never race on a receipt handle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "client/ordering/plan.h"
#include "client/simple_consumer.h"

namespace tokimq::ordering {

// Tag of messages without ordering properties (a barrier of their group).
inline constexpr EventTypeTag kUnorderedTag{0xFFFF};

// What one batch did; OrderedConsumer fills the handler figures, Settle the broker ones.
struct BatchReport {
  size_t records = 0;        // messages received
  size_t keys = 0;           // distinct message groups
  size_t handler_calls = 0;  // calls of the handler
  size_t events = 0;         // reduced events handed to the handler (events / calls per call)
  size_t failed_keys = 0;    // keys stopped by a failed decode or handler call
  std::vector<absl::Status> failures;  // the first error of each failed key
  size_t acked = 0;                    // ACKs accepted by the broker
  size_t stale_acks = 0;               // done, but the lease had ended: the message comes back
  size_t nacked = 0;                   // NACKs sent (one per failed group)
  size_t renewals = 0;                 // lease renewals made while executing
  // Records per handler call (the reduction and chunking together): records / handler_calls.
  double records_per_call() const {
    return handler_calls == 0 ? 0.0 : static_cast<double>(records) / handler_calls;
  }
};

class OrderedBatch {
 public:
  // `consumer` must outlive the batch; `messages` as received (one Receive).
  OrderedBatch(client::SimpleConsumer* consumer, std::vector<client::ReceivedMessage> messages);

  const std::vector<client::ReceivedMessage>& messages() const { return messages_; }
  // One header per message, same order (the plan's input).
  std::span<const PlanRecord> headers() const { return headers_; }
  // OK, or why message i's ordering properties are unusable (its decode must fail).
  const absl::Status& header_error(size_t i) const { return header_errors_[i]; }

  // A handler call over `records` returned OK: they are done. When that completes their key,
  // the key's messages are ACKed now. Returns the broker call's error (the ACKs are then
  // retried by Settle).
  absl::Status MarkDone(std::span<const size_t> records);

  // Renews the lease of every message not yet settled to `invisible_ms` from now (broker
  // time); their receipt handles are replaced. A failed renewal (lease already ended) leaves
  // that message to come back. Returns the number renewed.
  size_t Renew(int64_t invisible_ms);

  // ACKs the done messages not yet ACKed, then NACKs the lowest not-done message of each
  // message group (nack_delay_ms: nullopt = the group's backoff). Fills the broker figures of
  // *report. Call once, after execution.
  void Settle(std::optional<int64_t> nack_delay_ms, BatchReport* report);

 private:
  // ACKs `indexes` (mu_ held); counts accepted and stale ones.
  absl::Status AckLocked(const std::vector<size_t>& indexes);

  client::SimpleConsumer* const consumer_;
  std::vector<client::ReceivedMessage> messages_;
  std::vector<PlanRecord> headers_;
  std::vector<absl::Status> header_errors_;
  std::vector<std::string> groups_;  // message group per record

  std::mutex mu_;
  // Per record: done by a handler call; settled (ACKed, NACKed, returned by a NACK, or its
  // lease lost).
  std::vector<bool> done_;
  std::vector<bool> settled_;
  // Per key: its records, and how many are not done yet.
  absl::flat_hash_map<uint64_t, std::vector<size_t>> key_records_;
  absl::flat_hash_map<uint64_t, size_t> key_pending_;
  size_t acked_ = 0;
  size_t stale_acks_ = 0;
  size_t renewals_ = 0;
};

}  // namespace tokimq::ordering
