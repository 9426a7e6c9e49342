// Names: the one rule for topic names and consumer group names, checked at every entry point
// (native requests, the RocketMQ gRPC endpoint, the CLI, topic creation, the MessageStore's
// put and the timer's delivery). Documented in docs/protocol.md "Names".
//
//   name char    := [A-Za-z0-9._-]                       (ASCII only)
//   topic name   := 1..127 name chars, not "." or ".."   (RocketMQ: 127)
//   group name   := 1..248 name chars, not "." or ".."   (RocketMQ: 255; see below)
//   destination  := topic name | "%RETRY%" group name | "%DLQ%" group name
//
// A topic or group name may carry a namespace (common/namespace.h): "<namespace>%<name>",
// where <name> follows the rule above and the whole fits the same limit (127 / 248 bytes).
//
// A group's retry and DLQ topics ("%RETRY%<group>", "%DLQ%<group>") must be destinations, and
// every destination is one file-name component (consumequeue/<topic>/), at most 255 bytes:
// hence 255 - 7 = 248 for groups. RocketMQ's clients check ^[%|a-zA-Z0-9_-]+$; tokimq keeps
// '%' for the system prefixes, has no use for '|' (the tag-filter separator), and keeps '.',
// which topics created before this rule may hold.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/property_keys.h"

namespace tokimq {

inline constexpr size_t kMaxTopicNameBytes = 127;
inline constexpr size_t kMaxGroupNameBytes = 248;
inline constexpr size_t kMaxDestinationBytes = 255;  // "%RETRY%" + the longest group
inline constexpr char kRetryTopicPrefix[] = "%RETRY%";
inline constexpr char kDlqTopicPrefix[] = "%DLQ%";
// Prefix of the broker's own topics (timer, poison); users cannot create topics under it.
inline constexpr char kSystemTopicPrefix[] = "tokimq_sys_";
// Where messages the broker cannot deliver are parked (docs/operations.md "Poison messages").
// Each parked record keeps the original body and properties and adds the kPoison* properties.
inline constexpr char kPoisonTopic[] = "tokimq_sys_poison";
// Properties of a parked record: why it was parked, the destination it was meant for, and
// which path parked it ("timer", "retry", "dlq").
// The keys live in common/property_keys.h.
inline constexpr const auto& kPoisonReason = prop::kPoisonReason;
inline constexpr const auto& kPoisonTopicProp = prop::kPoisonTopic;
inline constexpr const auto& kPoisonQueueId = prop::kPoisonQueueId;
inline constexpr const auto& kPoisonSource = prop::kPoisonSource;

// The rule in one sentence each, for error messages and the CLI's help.
inline constexpr char kTopicNameRule[] =
    "a topic name is 1..127 characters of [A-Za-z0-9._-], not '.' or '..'";
inline constexpr char kGroupNameRule[] =
    "a group name is 1..248 characters of [A-Za-z0-9._-], not '.' or '..'";

// OK, or kInvalidArgument "invalid topic name '<name>': <kTopicNameRule>" (the name
// C-escaped and cut at 80 bytes, so a hostile name cannot garble a log line).
absl::Status ValidateTopicName(std::string_view name);
// OK, or kInvalidArgument naming the group and kGroupNameRule.
absl::Status ValidateGroupName(std::string_view name);
// A name messages may be stored under: a topic name, or a retry / DLQ topic of a valid group.
// OK, or kInvalidArgument naming the topic and the rule.
absl::Status ValidateDestination(std::string_view name);

bool IsValidTopicName(std::string_view name);
bool IsValidGroupName(std::string_view name);
bool IsValidDestination(std::string_view name);

// The name as error messages quote it: C-escaped, at most 80 input bytes, "..." when cut.
std::string QuoteName(std::string_view name);

}  // namespace tokimq
