// Conversions between the RocketMQ v2 gRPC messages and tokimq's native protocol: status codes,
// durations and timestamps, the property names under which RocketMQ-only fields are stored, and
// message views. Pure functions; no state, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "apache/rocketmq/v2/definition.pb.h"
#include "apache/rocketmq/v2/service.pb.h"
#include "proto/tokimq.pb.h"

namespace tokimq::rocketmq {

namespace v2 = ::apache::rocketmq::v2;

// RocketMQ-only fields are kept as message properties with this prefix. User properties with
// this prefix (or a name the native broker reserves) are refused with
// ILLEGAL_MESSAGE_PROPERTY_KEY.
inline constexpr char kRmqPropPrefix[] = "__RMQ_";
inline constexpr char kRmqMessageId[] = "__RMQ_MSG_ID";     // client-generated message id
inline constexpr char kRmqBornHost[] = "__RMQ_BORN_HOST";
inline constexpr char kRmqTraceContext[] = "__RMQ_TRACE_CTX";
inline constexpr char kRmqBodyEncoding[] = "__RMQ_BODY_ENC";  // "GZIP" when the body is gzipped
// RocketMQ's name for the message group as a user-visible property (MessageConst
// PROPERTY_SHARDING_KEY): set on received messages that carry a message group.
inline constexpr char kShardingKeyProperty[] = "__SHARDINGKEY";

// True for names that are not user properties: the native broker's system properties and the
// __RMQ_ ones above.
bool IsReservedProperty(const std::string& name);

// What a failed native request means for the RPC being served; picks the RocketMQ code for
// kInvalidArgument / kNotFound / kFailedPrecondition.
enum class RpcKind { kRoute, kSend, kRecall, kReceive, kReceipt, kOther };

v2::Code CodeFromNative(const proto::Status& status, RpcKind kind);

// A v2::Status with `code` and `message`.
v2::Status MakeStatus(v2::Code code, const std::string& message);
inline v2::Status OkStatus() { return MakeStatus(v2::Code::OK, "OK"); }
// The name rule (common/names.h) for what RocketMQ clients send: ILLEGAL_CONSUMER_GROUP /
// ILLEGAL_TOPIC with RocketMQ's text (error_texts.h) and the rule in the message, or
// std::nullopt for a valid name. A topic may be a retry / DLQ topic of a valid group.
std::optional<v2::Status> GroupNameError(const std::string& group);
std::optional<v2::Status> TopicNameError(const std::string& topic);
// The v2 status for a native response (OK when it carries no error).
v2::Status StatusFromNative(const proto::Response& resp, RpcKind kind);

int64_t DurationMs(const google::protobuf::Duration& d);
int64_t TimestampMs(const google::protobuf::Timestamp& t);
void SetDurationMs(int64_t ms, google::protobuf::Duration* out);
void SetTimestampMs(int64_t ms, google::protobuf::Timestamp* out);

// Upper-case hex MD5 of `data`, the digest the official clients verify (MD5 is the one digest
// whose text form all of them agree on).
std::string Md5Hex(const std::string& data);

// Recall handles given to RocketMQ clients carry the message id ("<id>:<native handle>") so
// RecallMessage can answer with it. Decode returns false for a handle without the separator
// (then `native` is the whole handle and `message_id` empty).
std::string EncodeRecallHandle(const std::string& message_id, const std::string& native);
bool DecodeRecallHandle(const std::string& handle, std::string* message_id, std::string* native);

// The message-group rule of SendMessage (RocketMQ's proxy: the group makes a message FIFO, and
// the message's type must match the topic's). OK when `sp` carries a group and `topic` is FIFO,
// or neither. Errors: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE for a group on a non-FIFO topic or no
// group on a FIFO topic; ILLEGAL_MESSAGE_GROUP for a FIFO message type without a group, and for
// a group that is empty, longer than kMaxMessageGroupBytes (256 bytes, the native limit) or
// holds control characters (RocketMQ refuses those too).
v2::Status CheckMessageGroup(const v2::SystemProperties& sp, const proto::TopicConfig& topic);

// The native message limits (common/message_limits.h) on a native send entry built from a
// RocketMQ message: OK, or ILLEGAL_MESSAGE_KEY (keys over 16 KiB), ILLEGAL_MESSAGE_TAG (tag over
// 16 KiB), ILLEGAL_MESSAGE_PROPERTY_KEY (a property name over 1 KiB or empty), or
// MESSAGE_PROPERTIES_TOO_LARGE (a value over 16 KiB, more than 128 user properties, or keys,
// tag and properties over 32 KiB together), with the native error text. The endpoint's own
// __RMQ_ properties do not count against the 128.
v2::Status CheckHeaderLimits(const proto::SendEntry& entry);

// Builds the RocketMQ view of a received native message. `invisible_ms` is the lease the
// receive asked for.
void ToRocketMessage(const proto::ReceivedMessage& in, int64_t invisible_ms, v2::Message* out);

// The RocketMQ message type of a native topic's queues ([NORMAL, DELAY] for normal and delay
// topics: tokimq delays messages on any topic).
void AddAcceptedTypes(proto::TopicType type, v2::MessageQueue* mq);

}  // namespace tokimq::rocketmq
