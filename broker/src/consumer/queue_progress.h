// Progress: what one consumer group has done in one queue (QueueKey): the consume offset (next
// queue offset not yet handed out) and the entries above it that are not done (live leases;
// FIFO queues: parked entries too). Offsets below the consume offset without an entry are done
// (acked, expired into a retry copy, moved to the DLQ or skipped by the tag filter).
//
// Owned by ConsumerServiceImpl (never erased, so pointers stay valid). Thread-safety: every
// field but `key` is guarded by `mu` (consumer_service_impl.h, "Locking").
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "consumer/fifo_group_index.h"
#include "consumer/group_state.h"

namespace tokimq::consumer {

struct Progress {
  Progress(QueueKey k, bool is_fifo) : key(std::move(k)), fifo(is_fifo) {}
  std::mutex mu;
  const QueueKey key;
  // A FIFO topic's own queue: message groups block (ReceiveFromFifo); expired and nacked
  // leases are parked in place instead of copied to the retry topic. Follows the topic's type
  // (SetFifo) when a topic is deleted and re-created with another type.
  bool fifo;
  int64_t consume_offset = -1;  // -1: not yet initialised from the store
  int64_t received = 0;         // messages handed out from this queue since the broker started
  // Queue offset -> live lease (FIFO: or parked entry). The leases of one block are
  // contiguous in this map (a block holds offsets handed out by one Receive, and those ranges
  // never interleave).
  std::map<int64_t, LeaseRecord> leases;
  // FIFO queues: the message-group index over `leases`; empty for other queues.
  FifoGroupIndex fifo_index;

  // Every change to `leases` of a FIFO queue goes through these (mu held); for other queues
  // they only change `leases`.
  void SetLease(int64_t offset, LeaseRecord lease);
  void EraseLease(int64_t offset);
  // Switches FIFO handling on or off and rebuilds the index. Off is refused (stays FIFO)
  // while parked entries remain: only FIFO handling hands them out.
  void SetFifo(bool on);
};

}  // namespace tokimq::consumer
