// InFlightCache: the messages handed out over gRPC whose lease is still open, keyed by receipt
// handle, so ForwardMessageToDeadLetterQueue (which names a message only by receipt handle and
// id) can copy the message into the DLQ topic. Bounded by bytes of body + properties; the oldest
// entries are evicted first, and a forward whose message was evicted falls back to a NACK.
//
// Memory only, not durable: after a restart every forward falls back to the NACK.
// Thread-safety: all methods lock one mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "proto/tokimq.pb.h"

namespace tokimq::rocketmq {

class InFlightCache {
 public:
  explicit InFlightCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  void Put(const std::string& receipt_handle, const proto::ReceivedMessage& m);
  // The entry, if still cached.
  std::optional<proto::ReceivedMessage> Get(const std::string& receipt_handle) const;
  // Moves an entry to a new handle (after ChangeInvisibleDuration).
  void Rename(const std::string& from, const std::string& to);
  void Erase(const std::string& receipt_handle);

  int64_t bytes() const;
  size_t size() const;

 private:
  static int64_t Cost(const proto::ReceivedMessage& m);
  void EvictLocked();

  const int64_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, proto::ReceivedMessage> entries_;
  std::deque<std::string> order_;  // insertion order; may hold handles already erased
  int64_t bytes_ = 0;
};

}  // namespace tokimq::rocketmq
