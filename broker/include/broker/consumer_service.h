// ConsumerService: lease-based consumption for consumer groups (SQS-style visibility timeout,
// RocketMQ 5 "pop" semantics).
//
// Receive hands out messages of a topic to a group under a lease (invisible duration). While a
// lease is live no other consumer of the group gets that message. Ack ends the lease (at most
// once per delivery: a used or stale receipt handle is refused). ChangeInvisibleDuration renews
// it and returns a new receipt handle; the old one stops working. When a lease expires (or the
// consumer Nacks), the message becomes receivable again with delivery attempt + 1 after a
// backoff (default 10s, 30s, 1m, 2m, then doubling up to 1h, then hourly); after max_attempts it
// goes to the DLQ topic "%DLQ%<group>". Expiries are driven by an in-memory index of lease
// deadlines (one entry per queue per Receive, rebuilt from the persisted leases on open), not by
// scanning; retry copies wait in the TimerStore.
//
// FIFO topics (docs/ordering.md "FIFO topics"; the message-group rule of SQS FIFO queues and
// RocketMQ 5 FIFO topics): messages carrying the same message group (property MSG_GROUP) in a
// queue are handed out in queue order, and while one of them is leased, or waits for its
// redelivery after an expired lease or a nack, the later ones of that group are not handed out;
// other groups flow. This holds for Orderly consumer groups (RocketMQ 5's consumeMessageOrderly;
// ConsumerServiceDeps::group_orderly, ReceiveRequest::orderly_by_default); a Concurrently group
// consumes a FIFO topic like any other topic. A retry stays in place (no retry topic), so the
// group keeps its order; the DLQ move of a group's head unblocks the group. Each queue keeps at most kMaxFifoParked
// messages waiting behind blocked groups; beyond that a Receive reads no further in that queue
// until groups unblock. Messages without a group are not ordered.
//
// Durability: group progress and in-flight leases live in RocksDB, written to the WAL before a
// call returns (so they survive a broker process crash) and fsynced every 50 ms in the
// background (so a power loss undoes at most the last ~50 ms: re-deliveries / duplicates, see
// docs/operations.md "Delivery guarantees"). One Receive is one write batch, whatever the
// number of queues it takes from.
//
// Threads: every method may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "commitlog/message.h"
#include "common/offsets.h"

namespace rocksdb {
class DB;
}

namespace tokimq {

class Clock;
class MessageStore;
class TimerStore;
namespace consumer {
class SqlFilter;
}

struct GroupPolicy {
  int max_attempts = 16;                      // then DLQ
  std::vector<int64_t> backoff_ms;            // empty: default schedule described above
  int64_t ttl_ms = 0;                         // 0: none; else un-ACKed older than this -> DLQ
};

struct ReceiveRequest {
  std::string group;
  std::string topic;
  int max_messages = 16;
  int64_t invisible_ms = 30'000;
  int64_t long_poll_ms = 0;     // wait up to this long for a message when none is ready
  std::string tag_filter;       // "" or "*": all; else "a||b"
  // SQL92 property filter (broker/src/consumer/sql_filter.h), parsed by the caller (the broker
  // parses the request's expression and refuses a bad one); null: none. A message must pass
  // both this and tag_filter; one that does not counts as consumed for the group, as a
  // tag-filtered one does (RocketMQ semantics).
  std::shared_ptr<const consumer::SqlFilter> sql_filter;
  // Hand out each message as its stored record bytes (ReceivedMessage::record) instead of a
  // decoded Message: one copy instead of a Message with a property map, for callers that
  // re-encode it anyway (the broker's handlers build the wire response from the record).
  bool raw_records = false;
  // Stop adding messages once their receive answers would exceed this many bytes (0: no
  // limit): each counts as its stored record plus its key and tag again plus 1 KiB of fixed
  // fields (ReceiveAnswerBytes; the answer repeats key and tag, so counting records alone let
  // ~500 messages with 16 KiB keys make a 16.3 MiB answer within an 8 MiB record budget). The
  // first message of a Receive is handed out whatever its size (max_message_bytes bounds it).
  // Keeps a response within the wire frame limit: the broker asks for kMaxReceiveResponseBytes.
  int64_t max_bytes = 0;
  // A message whose receive answer could exceed this many bytes (ReceiveAnswerBytes: its
  // record, its key and tag again, fixed fields) is never handed out, since no client could
  // read the answer and its lease would only expire again, forever: it is moved to the group's
  // DLQ instead (read from a DLQ topic: skipped), with a warning naming it. 0: no limit. The
  // broker asks for its wire frame limit. Messages stored within the send limits
  // (common/message_limits.h, max_message_size) never come near it; older ones might.
  int64_t max_message_bytes = 0;
  // FIFO topics (docs/ordering.md "Batches per message group"): messages of one message group
  // one Receive may hand out at most, consecutive in queue order, each under its own lease
  // (1..kMaxReceiveBatch; 1 = one message per group, the head). The group stays blocked until
  // every one is settled; a nack or an expired lease of one of them returns it and every later
  // one of the group that is still leased. Ignored for other topics.
  int max_per_group = 1;
  // Delivery order of a group whose order is not stored (ConsumerServiceDeps::group_orderly
  // answers nullopt): true, Orderly (the native API's default); false, Concurrently (the
  // RocketMQ endpoint's default, RocketMQ's own). Only an orderly group consumes a FIFO topic
  // in message-group order (docs/ordering.md "Delivery order of a consumer group").
  bool orderly_by_default = true;
};

// Messages one Receive hands out at most (ReceiveRequest::max_messages is 1..this), on every
// entry point (native Receive, the gRPC ReceiveMessage batch size).
inline constexpr int kMaxReceiveBatch = 1024;

// Answer bytes the broker puts into one Receive response at most (half the default 16 MiB
// frame limit, docs/protocol.md), beyond the first message.
inline constexpr int64_t kMaxReceiveResponseBytes = 8LL << 20;

struct ReceivedMessage {
  Message message;              // as stored in the topic (queue_offset set); empty when raw
  // ReceiveRequest::raw_records: the record exactly as stored (commitlog/record.h format,
  // docs/formats/commitlog.md; record::DecodeView reads it), and `message` is left empty.
  std::string record;
  std::string receipt_handle;   // opaque, printable
  int delivery_attempt = 1;
  int64_t deliver_ms = 0;       // when it became visible in the topic
  int64_t invisible_until_ms = 0;
};

// A consumer group's figures for Stats and /metrics (docs/metrics.md), all computed when asked.
struct GroupTopicMetrics {
  std::string topic;      // the user topic (its retry queue counts here too)
  int64_t received = 0;   // messages handed out since the broker started (redeliveries count)
  // Messages stored in the queues the group has received from and not yet handed out to it:
  // sum over those queues (its retry queue included) of end offset - consume offset.
  int64_t lag = 0;
};
struct GroupMetrics {
  int64_t acked = 0;          // deliveries acked since the broker started
  int64_t lease_expired = 0;  // leases that ran out without an ack (not nacks) since start
  // When the oldest message the group has not acked became visible in its queue (ms since
  // the epoch; a retry copy counts from its own deliver time): over the queues the group has
  // received from, the lowest offset that is leased, parked or not yet handed out. 0: none.
  int64_t oldest_unacked_visible_ms = 0;
  std::vector<GroupTopicMetrics> topics;  // by topic name
};

class ConsumerService {
 public:
  virtual ~ConsumerService() = default;

  // Errors: kNotFound (unknown topic), kInvalidArgument (bad sizes/durations). An empty result
  // is OK (nothing ready within long_poll_ms).
  virtual absl::StatusOr<std::vector<ReceivedMessage>> Receive(const ReceiveRequest& req) = 0;
  // OK once per delivery. kFailedPrecondition: handle already used, renewed, or its lease
  // expired and the message was handed out again. kInvalidArgument: malformed handle.
  virtual absl::Status Ack(const std::string& group, const std::string& receipt_handle) = 0;
  // Acks several deliveries of `group` with one group-state write. Result i is the status of
  // receipt_handles[i], with the codes of Ack; a handle repeated in the batch is OK once, then
  // kFailedPrecondition. The broker's Ack request calls this once for all its handles.
  // The handles are views (the broker passes its request's strings without copying them).
  virtual std::vector<absl::Status> AckBatch(
      const std::string& group, const std::vector<std::string_view>& receipt_handles) {
    std::vector<absl::Status> out;
    out.reserve(receipt_handles.size());
    for (std::string_view h : receipt_handles) out.push_back(Ack(group, std::string(h)));
    return out;
  }
  // Returns the new receipt handle. Errors as Ack.
  virtual absl::StatusOr<std::string> ChangeInvisibleDuration(const std::string& group,
                                                              const std::string& receipt_handle,
                                                              int64_t invisible_ms) = 0;
  // Ends the lease now; the message comes back after `delay_ms` (nullopt: the backoff
  // schedule) with attempt + 1. Errors as Ack.
  virtual absl::Status Nack(const std::string& group, const std::string& receipt_handle,
                            std::optional<int64_t> delay_ms) = 0;

  virtual void SetGroupPolicy(const std::string& group, GroupPolicy policy) = 0;

  // Gauges for Stats.
  virtual int64_t InFlight(const std::string& group) const = 0;
  virtual int64_t DlqDepth(const std::string& group) const = 0;
  // FIFO queues: entries held by no consumer, waiting behind their message group or for a
  // redelivery time. 0 for groups that read no FIFO topic.
  virtual int64_t Parked(const std::string& /*group*/) const { return 0; }
  // Counters and backlog of `group` (see GroupMetrics). Reads one message per queue with a
  // backlog (for its visible time). Zeros for an unknown group.
  virtual GroupMetrics Metrics(const std::string& /*group*/) const { return {}; }
  // Entries in the in-memory lease-expiry index (all groups): bounded by a multiple of the
  // leases in flight (stale entries of acked or renewed leases are compacted away).
  virtual int64_t ExpiryIndexEntries() const { return 0; }

  // The broker fans MessageStore dispatch notifications out to this (wakes long polls).
  virtual void OnDispatch(const std::string& topic, int32_t queue_id,
                          QueueOffset queue_offset) = 0;
  // Processes due lease expiries / retries that are ready at the current clock time (tests on a
  // ManualClock call this after advancing the clock; Start() does it on a thread).
  virtual absl::Status RunUntilIdle() = 0;
  virtual absl::Status Start() = 0;
  virtual absl::Status Stop() = 0;
};

// System topic into which older brokers (the ones that wrote group-state key
// "group/%sys/lease_topic_offset") had the TimerStore deliver lease-expiry markers. This broker
// neither writes nor reads it; markers still pending in such a data directory end up there and
// are removed by retention.
inline constexpr char kLeaseTopic[] = "tokimq_sys_lease";

struct ConsumerServiceDeps {
  Clock* clock = nullptr;
  MessageStore* store = nullptr;
  TimerStore* timers = nullptr;
  rocksdb::DB* db = nullptr;  // shared broker metadata DB; this service uses keys "group/..."
  // Number of queues of `topic`, or kNotFound. Used by Receive and for retry/DLQ topics.
  std::function<absl::StatusOr<int>(const std::string& topic)> queue_count;
  // Whether `topic` is a FIFO topic (message groups: see ConsumerService above). Optional:
  // absent means no topic is FIFO.
  std::function<bool(const std::string& topic)> is_fifo;
  // The stored delivery order of `group`: true Orderly, false Concurrently, nullopt none stored
  // (then ReceiveRequest::orderly_by_default decides; where no request is at hand, as when
  // leases are recovered, Orderly). Optional: absent means every group is Orderly. A group
  // switched to Concurrently keeps its FIFO bookkeeping while messages wait behind their
  // message groups (parked) in a queue, and drops it once none do.
  std::function<std::optional<bool>(const std::string& group)> group_orderly;
  // Asked before each group-state write of `bytes` to `db`; a non-OK status (kResourceExhausted
  // when the disk has no room left for it) fails that write and the request behind it, before
  // RocksDB sees it. Optional: absent admits every write.
  std::function<absl::Status(uint64_t bytes)> admit_state_write;
  // Time base of the group-state WAL syncer (every kWalSyncIntervalMs, consumer_service_impl.h).
  // nullptr (the broker's default): real time, even on a manual `clock` that may never move. A
  // clock here (BrokerOptions::clock, a ManualClock in tests): the syncer syncs when that clock
  // has moved kWalSyncIntervalMs past the previous sync, so a test can place a power loss at a
  // known distance from the last sync.
  Clock* wal_sync_clock = nullptr;
};

// Creates the RocksDB/TimerStore-backed implementation; recovers group state from `db`.
absl::StatusOr<std::unique_ptr<ConsumerService>> NewConsumerService(ConsumerServiceDeps deps);

}  // namespace tokimq
