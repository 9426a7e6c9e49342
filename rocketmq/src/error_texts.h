// RocketMQ's error texts: the wording RocketMQ 5 (broker and proxy) puts into the status
// message of the common refusals, so a RocketMQ user who searches for the text a client logged
// finds the cause. The codes were already RocketMQ's; these give the messages. Each text keeps
// tokimq's own detail (the rule, the size, the command that fixes it) after RocketMQ's words.
// Listed in docs/rocketmq-compat.md "Error texts".
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "convert.h"

namespace tokimq::rocketmq {

// QueryRoute of an unknown topic (the proxy's route service):
// "No topic route info in name server for the topic: <topic> ...".
std::string RouteNotFoundText(const std::string& topic);
// Any other RPC naming an unknown topic (the broker's processors):
// "topic[<topic>] not exist, apply first please! ...".
std::string TopicNotFoundText(const std::string& topic);
// A consumer group that must exist and does not (the broker's processors):
// "subscription group [<group>] does not exist, apply first please! ...".
std::string GroupNotFoundText(const std::string& group);
// A name outside tokimq's rule (common/names.h), in TopicValidator's words: "The specified
// topic: <t>, contains illegal characters, allowing only ^[a-zA-Z0-9._-]+$" or "..., is longer
// than topic max length: 127" (the same with "group" and 248 for groups).
std::string IllegalTopicText(const std::string& topic);
std::string IllegalGroupText(const std::string& group);
// The proxy's SendMessage check: "message body cannot exceed the max <max_bytes> ...".
std::string BodyTooLargeText(int64_t body_bytes, int64_t max_bytes);
// The proxy's invisible-time check: "the invisibleTime is too small. min is <min_ms>" or
// "... too large. max is <max_ms>", with the duration asked for (all in ms).
std::string InvisibleTimeText(int64_t ms, int64_t min_ms, int64_t max_ms);

// Replaces the message of a TOPIC_NOT_FOUND / CONSUMER_GROUP_NOT_FOUND status that came from
// a native answer by RocketMQ's text for `topic` / `group` (kind kRoute: the route text),
// keeping the native message after it. Other codes are left as they are.
void UseRocketMqText(v2::Status* status, RpcKind kind, const std::string& topic,
                     const std::string& group);

}  // namespace tokimq::rocketmq
