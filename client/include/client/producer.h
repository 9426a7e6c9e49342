// Producer: sends messages (immediate, delayed or at an absolute time) and recalls scheduled
// ones, over one reusable pipelined connection (reconnected after a failure).
//
// Errors are absl::Status with the broker's text preserved: kNotFound (no such topic),
// kInvalidArgument (delay above the topic's max, body too large, ...), kUnavailable (broker
// unreachable / connection lost: the message may or may not be stored), kDeadlineExceeded
// (request timeout: same), kResourceExhausted (disk full, frame too large).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"

namespace tokimq::client {

struct OutgoingMessage {
  std::string topic;
  std::string body;
  std::string key;  // selects the queue (same key -> same queue); FIFO group if no message_group
  std::string tag;
  // FIFO topics: messages of one group are consumed in send order, one at a time (1..256
  // bytes; docs/ordering.md). Refused by non-FIFO topics.
  std::string message_group;
  std::map<std::string, std::string> properties;
  std::optional<int64_t> delay_ms;       // relative to the broker's clock
  std::optional<int64_t> deliver_at_ms;  // absolute, ms since epoch (wins over delay_ms)
};

struct SendReceipt {
  std::string message_id;
  std::string topic;
  int32_t queue_id = 0;
  int64_t queue_offset = -1;
  std::string recall_handle;  // empty when delivered at once
  int64_t deliver_at_ms = 0;
  bool delayed = false;
};

class Producer {
 public:
  explicit Producer(ClientOptions options);

  absl::StatusOr<SendReceipt> Send(const OutgoingMessage& msg);
  // All messages in one request; all are validated before any is stored. Key, tag and
  // properties over a limit of common/message_limits.h: kInvalidArgument before anything is
  // sent ("message <i>: ..." for a batch of several), as the broker would answer.
  absl::StatusOr<std::vector<SendReceipt>> SendBatch(const std::vector<OutgoingMessage>& msgs);
  std::future<absl::StatusOr<SendReceipt>> SendAsync(const OutgoingMessage& msg);
  // `done` runs on the thread that reads the response (the connection's background thread, or
  // a thread blocked in a synchronous call on the same Producer): it must not block, and must
  // not make a synchronous call on this Producer.
  void SendAsync(const OutgoingMessage& msg,
                 std::function<void(absl::StatusOr<SendReceipt>)> done);
  // Batch form of the callback API (pipelining: many batches may be in flight).
  //
  // Order: the broker may store requests that are in flight at the same time in any order.
  // Messages of one FIFO message group are consumed in the order they are stored, so send a
  // group's messages in one request, or wait for a send to complete before the next one of the
  // same group (RocketMQ's rule for ordered messages: one producer, synchronous sends).
  void SendBatchAsync(const std::vector<OutgoingMessage>& msgs,
                      std::function<void(absl::StatusOr<std::vector<SendReceipt>>)> done);

  // OK: the message will never be delivered. kNotFound: unknown handle. kFailedPrecondition:
  // already delivered or recalled.
  absl::Status Recall(const std::string& recall_handle);

 private:
  ConnectionHolder conn_;
};

}  // namespace tokimq::client
