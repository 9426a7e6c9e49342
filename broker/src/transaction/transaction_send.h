// The send-side rules of transactional messages (docs/transactions.md), checked for every entry
// of a native Send (and so for the gRPC SendMessage, which calls Broker::Handle).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "broker/metadata_store.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {

// RocketMQ's rule: a transactional send needs a TRANSACTION topic, and a TRANSACTION topic
// takes transactional sends only. kInvalidArgument naming the topic otherwise.
absl::Status CheckTransactional(const proto::SendEntry& e, const TopicConfig& topic);

// The check immunity of a transactional entry, ms: SendEntry.check_immunity_ms, else the
// property CHECK_IMMUNITY_TIME_IN_SECONDS (RocketMQ; whole seconds), else `default_ms`.
// kInvalidArgument when not within 1 ms .. 1 h (kMaxCheckImmunityMs) or not a number.
absl::StatusOr<int64_t> CheckImmunityMsOf(const proto::SendEntry& e, int64_t default_ms);

}  // namespace tokimq::broker
