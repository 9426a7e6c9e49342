// RetryCopyWriter: the copy of a message that ends a lease without an ack. A retry copy goes
// to "%RETRY%<group>" through the TimerStore (visible at its backoff time); a dead-letter copy
// goes to "%DLQ%<group>" now. A copy that can never be stored (a group named before the name
// rule has no valid retry or DLQ topic; a copy the store refuses) is parked in kPoisonTopic
// instead, so the lease ends and nothing retries it forever.
//
// Lifetime: borrows the clock and stores; outlived by them. Thread-safe (the stores are; the
// log limiter locks itself). Durability: the store's (Put / Schedule return once the copy is
// durable per the flush policy).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "commitlog/message.h"
#include "commitlog/record.h"
#include "common/clock.h"
#include "common/log_limiter.h"
#include "consumer/group_state.h"

namespace tokimq {
class MessageStore;
class TimerStore;
}  // namespace tokimq

namespace tokimq::consumer {

// When the broker first stored `m`: its FIRST_STORE_MS property (retry copies keep the
// original's time), else its store time. A group's TTL counts from it.
int64_t FirstStoreMs(const Message& m);
int64_t FirstStoreMs(const record::RecordView& v);

class RetryCopyWriter {
 public:
  RetryCopyWriter(Clock* clock, MessageStore* store, TimerStore* timers)
      : clock_(clock), store_(store), timers_(timers) {}

  // Writes a copy of `m` (read from k.read_topic) into the DLQ (now) or into the retry topic
  // (at deliver_ms, ms since the epoch) with DELIVERY_ATTEMPT = `attempt`, ORIGIN_TOPIC =
  // k.topic and FIRST_STORE_MS kept; timer properties of the previous trip are dropped.
  // A copy the name rule or the store refuses (kInvalidArgument) is parked (Park): OK, the
  // lease may end. Errors: transient store errors only (the lease stays; expiry tries again).
  absl::Status Put(const QueueKey& k, Message m, uint32_t attempt, bool to_dlq,
                   int64_t deliver_ms);
  // Parks `copy` (destination in copy.topic) in kPoisonTopic with POISON_* properties
  // (`source`: "retry" or "dlq"; `why`: the refusal). Without its body if the store refuses it
  // whole; dropped (logged) if even that is refused. Errors: transient store errors only.
  absl::Status Park(Message copy, const char* source, const absl::Status& why);

 private:
  Clock* const clock_;
  MessageStore* const store_;
  TimerStore* const timers_;
  LogLimiter poison_log_{10, 1000};  // Park: one line per parked copy, at most 10 a second
};

}  // namespace tokimq::consumer
