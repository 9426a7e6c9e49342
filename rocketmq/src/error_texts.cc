#include "error_texts.h"

#include <fmt/format.h>

#include "common/names.h"

namespace tokimq::rocketmq {
namespace {

// tokimq's name characters in the regex form RocketMQ's TopicValidator prints.
constexpr char kNamePattern[] = "^[a-zA-Z0-9._-]+$";

std::string IllegalNameText(const char* what, const std::string& name, size_t max_bytes,
                            bool valid) {
  const std::string quoted = QuoteName(name);
  if (name.empty()) return fmt::format("The specified {} is blank.", what);
  if (name.size() > max_bytes) {
    return fmt::format("The specified {}: {}, is longer than {} max length: {}", what, quoted,
                       what, max_bytes);
  }
  if (!valid && (name == "." || name == "..")) {
    return fmt::format("The specified {}: {}, is not allowed ('.' and '..' are reserved)", what,
                       quoted);
  }
  return fmt::format("The specified {}: {}, contains illegal characters, allowing only {}", what,
                     quoted, kNamePattern);
}

}  // namespace

std::string RouteNotFoundText(const std::string& topic) {
  return fmt::format(
      "No topic route info in name server for the topic: {} (tokimq: create it with `tokimq "
      "topic create --name {}`)",
      QuoteName(topic), QuoteName(topic));
}

std::string TopicNotFoundText(const std::string& topic) {
  return fmt::format(
      "topic[{}] not exist, apply first please! (tokimq: create it with `tokimq topic create "
      "--name {}`)",
      QuoteName(topic), QuoteName(topic));
}

std::string GroupNotFoundText(const std::string& group) {
  return fmt::format(
      "subscription group [{}] does not exist, apply first please! (tokimq: create it with "
      "`tokimq group create --name {}`)",
      QuoteName(group), QuoteName(group));
}

std::string IllegalTopicText(const std::string& topic) {
  // Retry / DLQ topics: the group part decides.
  for (const char* prefix : {kRetryTopicPrefix, kDlqTopicPrefix}) {
    if (topic.rfind(prefix, 0) == 0) {
      return IllegalGroupText(topic.substr(std::string(prefix).size()));
    }
  }
  return IllegalNameText("topic", topic, kMaxTopicNameBytes, IsValidTopicName(topic));
}

std::string IllegalGroupText(const std::string& group) {
  return IllegalNameText("group", group, kMaxGroupNameBytes, IsValidGroupName(group));
}

std::string BodyTooLargeText(int64_t body_bytes, int64_t max_bytes) {
  return fmt::format("message body cannot exceed the max {} (body of {} bytes)", max_bytes,
                     body_bytes);
}

std::string InvisibleTimeText(int64_t ms, int64_t min_ms, int64_t max_ms) {
  if (ms < min_ms) {
    return fmt::format("the invisibleTime is too small. min is {} (got {} ms)", min_ms, ms);
  }
  return fmt::format("the invisibleTime is too large. max is {} (got {} ms)", max_ms, ms);
}

void UseRocketMqText(v2::Status* status, RpcKind kind, const std::string& topic,
                     const std::string& group) {
  std::string text;
  if (status->code() == v2::Code::TOPIC_NOT_FOUND) {
    text = kind == RpcKind::kRoute ? RouteNotFoundText(topic) : TopicNotFoundText(topic);
  } else if (status->code() == v2::Code::CONSUMER_GROUP_NOT_FOUND) {
    text = GroupNotFoundText(group);
  } else {
    return;
  }
  if (!status->message().empty()) text += "; " + status->message();
  status->set_message(text);
}

}  // namespace tokimq::rocketmq
