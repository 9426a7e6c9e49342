// The queue a keyed message lands in: FNV-1a 64 of the key (FIFO topics: of the message group)
// modulo the topic's queue count (docs/protocol.md "Send"), so one key's messages share one
// queue and its order. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/fnv1a.h"

namespace tokimq::broker {

// `queues` >= 1; returns a queue id in [0, queues).
inline int32_t QueueOfKey(std::string_view key, int32_t queues) {
  return static_cast<int32_t>(Fnv1a64(key) % static_cast<uint64_t>(queues));
}

}  // namespace tokimq::broker
