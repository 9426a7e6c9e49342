// Producer: sends messages (immediate, delayed or at an absolute time) and recalls scheduled
// ones, over one reusable pipelined connection (reconnected after a failure).
//
// Errors are absl::Status with the broker's text preserved: kNotFound (no such topic),
// kInvalidArgument (delay above the topic's max, body too large, ...), kUnavailable (broker
// unreachable / connection lost: the message may or may not be stored), kDeadlineExceeded
// (request timeout: same), kResourceExhausted (disk full, frame too large).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "common/offsets.h"

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

// Transactions (docs/transactions.md; RocketMQ 5's transactional messages). kUnknown: the
// checker cannot tell yet; the broker checks again after its check interval (30 s).
enum class TransactionResolution { kCommit, kRollback, kUnknown };

struct SendReceipt {
  std::string message_id;
  std::string topic;
  int32_t queue_id = 0;
  // In queue_id; a delayed send: its offset in the timer topic (the real queue gets one at
  // release).
  QueueOffset queue_offset = QueueOffset::kNone();
  std::string recall_handle;  // empty when delivered at once
  int64_t deliver_at_ms = 0;
  bool delayed = false;
  // ClusterProducer only: the broker that stored the message (recall_handle then names it too).
  std::string broker;
};

// What SendTransactional answers: the half message's receipt and the transaction id that
// EndTransaction names together with receipt.message_id.
struct TransactionReceipt {
  SendReceipt receipt;
  std::string transaction_id;
};

// One check-back from the broker: a half message of `topic` left open past its immunity time
// (default 6 s). The fields are the half message's (properties without the broker's own).
struct TransactionCheck {
  std::string topic, message_id, transaction_id, key, tag, body;
  std::map<std::string, std::string> properties;
};
// Answers a check from the application's own state (e.g. "does the order row exist?").
// Runs on the Producer's check-back thread; may block (it delays the next checks only).
using TransactionChecker = std::function<TransactionResolution(const TransactionCheck&)>;

class Producer {
 public:
  explicit Producer(ClientOptions options);
  // Stops the check-back thread, if any (an answer in flight completes first).
  ~Producer();

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

  // Transactional send: stores `msg` as a half message, durable but invisible, on a
  // TRANSACTION topic, and returns its receipt with the transaction id. The application then
  // runs its local transaction and calls EndTransaction. msg.delay_ms / deliver_at_ms are
  // honoured from the commit on (the official RocketMQ clients refuse delay + transaction).
  // A half's check immunity can be set per message with the property
  // "CHECK_IMMUNITY_TIME_IN_SECONDS" (RocketMQ's name; seconds, 1..3600).
  // Errors as Send, plus kInvalidArgument when the topic is not a TRANSACTION topic.
  absl::StatusOr<TransactionReceipt> SendTransactional(const OutgoingMessage& msg);
  // Commits (the message becomes visible in its topic, or enters the timer store when it has a
  // deliver time in the future) or rolls back (it is discarded) a half message. Durable before
  // OK. OK also when it already ended with the same resolution (retry after a lost reply is
  // safe); kFailedPrecondition: ended otherwise (or moved to the unresolved topic after max
  // checks); kNotFound: unknown message id, or a transaction id not matching it;
  // kInvalidArgument: r == kUnknown (nothing to do: leave it to the check-back).
  absl::Status EndTransaction(const std::string& topic, const std::string& message_id,
                              const std::string& transaction_id, TransactionResolution r);
  // Registers the check-back handler and the topics it answers for. The Producer then opens
  // the check-back channel to the broker on a second connection and a thread of its own (a
  // long poll, PollTransactionChecks in docs/protocol.md) and answers each check with
  // EndTransaction (source: check); kUnknown answers nothing (the broker checks again). Call
  // once, before or after sends; a second call replaces topics and checker. Thread-safe.
  void SetTransactionChecker(std::vector<std::string> topics, TransactionChecker checker);

 private:
  absl::Status EndTransactionFrom(const std::string& topic, const std::string& message_id,
                                  const std::string& transaction_id, TransactionResolution r,
                                  bool from_check);
  void CheckLoop();

  ConnectionHolder conn_;
  std::mutex checker_mu_;
  std::vector<std::string> checker_topics_;  // checker_mu_
  TransactionChecker checker_;               // checker_mu_
  std::atomic<bool> stopping_{false};
  std::thread check_thread_;
};

}  // namespace tokimq::client
