// Backoff policy: how long a message waits before its next delivery after a lease expired or
// was nacked. Pure function; thread-safe.
#pragma once

#include <cstdint>

#include "broker/consumer_service.h"

namespace tokimq::consumer {

// Delay before delivery attempt `failed_attempt` + 1, given that attempt `failed_attempt` (>= 1)
// expired or was nacked. Default: 10 s, 30 s, 1 min, 2 min, then doubling up to 1 h, then
// hourly (the schedule of Spanner queues / RocketMQ retry levels). A non-empty policy list
// overrides it; its last entry repeats.
int64_t BackoffMs(const GroupPolicy& policy, int failed_attempt);


}  // namespace tokimq::consumer
