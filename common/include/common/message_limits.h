// Message limits: the one home of the size limits on what a producer attaches to a message
// besides its body (key, tag, properties, message group), checked at every entry point (native
// Send, the RocketMQ gRPC SendMessage, the C++ Producer and the CLI) by CheckMessageHeaders.
// The body limit is the broker's max_message_size (config); topic and group NAME rules live
// in their own header. Documented in docs/protocol.md ("Message limits").
//
// Why: the broker puts the key twice in a receive answer (the key field and the KEYS
// property): without a limit an 8.5 MiB key makes a 17.8 MB answer, over the 16 MiB frame
// limit, so no consumer could ever receive it. With these limits the
// header part of a message is at most kMaxHeaderBytes (32 KiB), so a stored message's receive
// answer exceeds its body by at most about 2 x 32 KiB plus fixed fields.
//
// The values (bytes, not characters): anything RocketMQ 5's proxy accepts with its defaults
// (at most 128 user properties; user properties, tag and keys together at most 16 KiB) is
// accepted here, except property names over 1 KiB (SQS: names of at most 256 characters, i.e.
// at most 1 KiB of UTF-8). SQS allows 10 attributes; RocketMQ users commonly use more, so the
// count follows RocketMQ. Pure functions and constants; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace tokimq {

// The key (RocketMQ: all keys of a message, joined by spaces; stored as the KEYS property).
inline constexpr size_t kMaxKeyBytes = 16 * 1024;
// The tag (stored as the TAGS property).
inline constexpr size_t kMaxTagBytes = 16 * 1024;
// One property's name and value.
inline constexpr size_t kMaxPropertyNameBytes = 1024;
inline constexpr size_t kMaxPropertyValueBytes = 16 * 1024;
// Properties per message (RocketMQ 5 proxy: userPropertyMaxNum = 128), not counting those an
// endpoint adds for itself (below).
inline constexpr size_t kMaxProperties = 128;
// Key + tag + every property name and value, in bytes: twice RocketMQ 5 proxy's default
// maxUserPropertySize (16 KiB over user properties, tag and keys), below RocketMQ's 32,767-byte
// limit on a message's encoded properties.
inline constexpr size_t kMaxHeaderBytes = 32 * 1024;
// Longest FIFO message group (SQS allows 128 characters; RocketMQ 5 proxy 64 bytes by default).
inline constexpr size_t kMaxMessageGroupBytes = 256;

// What a stored message's receive answer can add to its body at most: key, tag and properties
// twice (as stored, and as answer fields), plus the topic, the broker's own properties and the
// fixed fields. A broker refuses a max message size that leaves less than this below its
// frame limit (a message of that size could never be received).
inline constexpr size_t kMaxMessageOverheadBytes = 2 * kMaxHeaderBytes + 4096;

// Properties an endpoint keeps for itself on the messages it sends (the RocketMQ gRPC endpoint:
// client message id, born host, trace context, body encoding) carry this prefix. They do not
// count against kMaxProperties (a RocketMQ client may use all 128) but against
// kMaxEndpointProperties, and their bytes count against kMaxHeaderBytes like any other.
inline constexpr char kEndpointPropertyPrefix[] = "__RMQ_";
inline constexpr size_t kMaxEndpointProperties = 8;

// Which limit a message broke (so an endpoint can pick its own error code).
enum class HeaderLimit {
  kNone,
  kKey,            // kMaxKeyBytes
  kTag,            // kMaxTagBytes
  kPropertyName,   // kMaxPropertyNameBytes, or an empty name
  kPropertyValue,  // kMaxPropertyValueBytes
  kPropertyCount,  // kMaxProperties / kMaxEndpointProperties
  kHeaderBytes,    // kMaxHeaderBytes
};

// Accumulates one message's key, tag and properties and checks them against the limits above.
// Use CheckMessageHeaders unless the properties come one by one.
class MessageHeaderCheck {
 public:
  MessageHeaderCheck(std::string_view key, std::string_view tag);
  void AddProperty(std::string_view name, std::string_view value);
  // OK, or kInvalidArgument naming the first limit exceeded (e.g. "key of 8912896 bytes
  // exceeds the limit of 16384 bytes"); *which (when given) is set either way.
  absl::Status Finish(HeaderLimit* which = nullptr) const;

 private:
  void Fail(HeaderLimit limit, absl::Status s);
  bool failed_ok() const { return failed_ == HeaderLimit::kNone; }

  size_t header_bytes_ = 0;
  size_t properties_ = 0;
  size_t endpoint_properties_ = 0;
  HeaderLimit failed_ = HeaderLimit::kNone;
  absl::Status status_;
};

// Checks a message's key, tag and properties (any map of string-like name -> value, e.g.
// std::map<std::string, std::string> or a protobuf Map) against the limits above.
template <typename PropertyMap>
absl::Status CheckMessageHeaders(std::string_view key, std::string_view tag,
                                 const PropertyMap& properties, HeaderLimit* which = nullptr) {
  MessageHeaderCheck check(key, tag);
  for (const auto& [name, value] : properties) check.AddProperty(name, value);
  return check.Finish(which);
}

}  // namespace tokimq
