// SimpleConsumer: lease-based consumption for one consumer group (RocketMQ 5 SimpleConsumer /
// SQS style): Receive hands out messages invisible to the group's other consumers for
// `invisible_ms`; Ack ends the lease (once); ChangeInvisibleDuration renews it under a new
// receipt handle (the old one stops working); Nack returns the message for redelivery.
//
// Errors as Producer; Ack/renew/Nack return kFailedPrecondition for a used or stale handle.
// Thread-safety: every method may be called from any thread; one pipelined connection.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "common/offsets.h"

namespace tokimq::client {

struct ReceivedMessage {
  std::string message_id;
  std::string topic;
  int32_t queue_id = 0;
  QueueOffset queue_offset = QueueOffset::kNone();  // in (topic, queue_id)
  std::string body;
  std::string key;
  std::string tag;
  std::map<std::string, std::string> properties;
  int64_t born_ms = 0;
  std::string receipt_handle;
  int delivery_attempt = 1;
  int64_t deliver_ms = 0;
  int64_t invisible_until_ms = 0;
};

struct ReceiveOptions {
  int max_messages = 16;
  int64_t invisible_ms = 30'000;
  int64_t long_poll_ms = 5'000;
  std::string tag_filter;  // "" or "*": all; "a||b"
  // SQL92 property filter, RocketMQ's subset (docs/rocketmq-compat.md "SQL92 filters"), e.g.
  // "region = 'eu' AND amount > 100"; "": none. Applies together with tag_filter. A bad
  // expression fails the Receive with kInvalidArgument ("sql filter: ... at byte n").
  std::string sql_filter;
  // FIFO topics: up to this many consecutive messages of one message group per Receive, each
  // under its own lease; 1 = the group's head only (docs/ordering.md "Batches per message
  // group"). 1..1024. Ignored for other topics.
  int max_per_group = 1;
};

class SimpleConsumer {
 public:
  SimpleConsumer(ClientOptions options, std::string group);

  // Empty result: nothing became ready within the long poll.
  absl::StatusOr<std::vector<ReceivedMessage>> Receive(const std::string& topic,
                                                       const ReceiveOptions& options = {});
  // Acks `ack_handles` and receives in one round trip (ReceiveRequest.ack_receipt_handles,
  // docs/protocol.md "Acks carried by a receive"): what AckBatch(ack_handles) then Receive
  // do, for a consumer that asks for its next batch when it is done with the last (BullMQ's
  // fetch-next on completion). *ack_results: one status per handle, in order, with AckBatch's
  // codes. The acks are applied before the receive, once, even if it then waits out its long
  // poll. A receive the broker refuses (its validation: unknown topic, bad sizes) fails the
  // call and acks nothing. At most 1024 handles. A broker that predates the field ignores
  // them: then this client acks them with AckBatch after the receive.
  absl::StatusOr<std::vector<ReceivedMessage>> AckAndReceive(
      const std::vector<std::string>& ack_handles, const std::string& topic,
      const ReceiveOptions& options, std::vector<absl::Status>* ack_results);
  absl::Status Ack(const std::string& receipt_handle);
  // One status per handle, same order; the call itself fails only on transport errors.
  absl::StatusOr<std::vector<absl::Status>> AckBatch(const std::vector<std::string>& handles);
  // The new receipt handle.
  absl::StatusOr<std::string> ChangeInvisibleDuration(const std::string& receipt_handle,
                                                      int64_t invisible_ms);
  // delay_ms nullopt: the group's backoff schedule.
  absl::Status Nack(const std::string& receipt_handle, std::optional<int64_t> delay_ms = {});

  const std::string& group() const { return group_; }

 private:
  ConnectionHolder conn_;
  std::string group_;
};

}  // namespace tokimq::client
