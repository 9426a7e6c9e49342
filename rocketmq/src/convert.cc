#include "convert.h"
#include "error_texts.h"

#include <openssl/evp.h>

#include <array>
#include <set>
#include <string_view>

#include "absl/status/status.h"
#include "commitlog/message.h"
#include "common/message_limits.h"
#include "common/names.h"
#include "common/parse_int.h"
#include "timerstore/timer_store.h"

namespace tokimq::rocketmq {
namespace {

const std::set<std::string>& NativeSystemProperties() {
  static const std::set<std::string>* names = new std::set<std::string>{
      prop::kKeys,           prop::kTag,           prop::kMessageId,
      prop::kMessageGroup,   prop::kRealTopic,     prop::kRealQueueId,
      prop::kDeliverMs,      prop::kTimerEnqueueMs, prop::kTimerDequeueMs,
      prop::kTimerUnitPos,   prop::kTimerRollCount, prop::kDeliveryAttempt,
      prop::kOriginalTopic,  prop::kTimerDeleteOf,  prop::kTimerSourceOffset,
      prop::kFirstStoreMs};
  return *names;
}

const std::string* FindProp(const proto::ReceivedMessage& m, const char* name) {
  auto it = m.properties().find(name);
  return it == m.properties().end() ? nullptr : &it->second;
}

const char* TopicTypeLabel(proto::TopicType type) {
  switch (type) {
    case proto::NORMAL: return "normal";
    case proto::DELAY: return "delay";
    case proto::FIFO: return "FIFO";
    case proto::TRANSACTION: return "transactional";
    default: return "untyped";
  }
}

}  // namespace

std::optional<v2::Status> GroupNameError(const std::string& group) {
  absl::Status s = ValidateGroupName(group);
  if (s.ok()) return std::nullopt;
  return MakeStatus(v2::Code::ILLEGAL_CONSUMER_GROUP,
                    IllegalGroupText(group) + "; " + std::string(s.message()));
}

std::optional<v2::Status> TopicNameError(const std::string& topic) {
  absl::Status s = ValidateDestination(topic);
  if (s.ok()) return std::nullopt;
  return MakeStatus(v2::Code::ILLEGAL_TOPIC,
                    IllegalTopicText(topic) + "; " + std::string(s.message()));
}

static_assert(std::string_view(kRmqPropPrefix) == kEndpointPropertyPrefix,
              "the endpoint's own properties are the ones the native limits set apart");

bool IsReservedProperty(const std::string& name) {
  return name.rfind(kRmqPropPrefix, 0) == 0 || NativeSystemProperties().count(name) > 0;
}

v2::Code CodeFromNative(const proto::Status& status, RpcKind kind) {
  switch (static_cast<absl::StatusCode>(status.code())) {
    case absl::StatusCode::kOk:
      return v2::Code::OK;
    case absl::StatusCode::kInvalidArgument: {
      const std::string& m = status.message();
      if (kind == RpcKind::kSend && m.find("max delay") != std::string::npos) {
        return v2::Code::ILLEGAL_DELIVERY_TIME;
      }
      if (kind == RpcKind::kSend && m.find("max message size") != std::string::npos) {
        return v2::Code::MESSAGE_BODY_TOO_LARGE;
      }
      if (kind == RpcKind::kReceipt) return v2::Code::INVALID_RECEIPT_HANDLE;
      return v2::Code::BAD_REQUEST;
    }
    case absl::StatusCode::kNotFound:
      if (kind == RpcKind::kRoute || kind == RpcKind::kSend || kind == RpcKind::kReceive) {
        return v2::Code::TOPIC_NOT_FOUND;
      }
      if (kind == RpcKind::kReceipt) return v2::Code::INVALID_RECEIPT_HANDLE;
      return v2::Code::NOT_FOUND;
    case absl::StatusCode::kFailedPrecondition:
      // A used, renewed or expired receipt handle: what RocketMQ reports as an invalid handle
      // (push consumers stop retrying the ack on this code).
      if (kind == RpcKind::kReceipt) return v2::Code::INVALID_RECEIPT_HANDLE;
      return v2::Code::PRECONDITION_FAILED;
    case absl::StatusCode::kAlreadyExists:
      return v2::Code::BAD_REQUEST;
    case absl::StatusCode::kResourceExhausted:
      return v2::Code::TOO_MANY_REQUESTS;
    case absl::StatusCode::kUnimplemented:
      return v2::Code::NOT_IMPLEMENTED;
    case absl::StatusCode::kDeadlineExceeded:
      return v2::Code::MASTER_PERSISTENCE_TIMEOUT;
    case absl::StatusCode::kUnauthenticated:  // RocketMQ's codes (issue 17)
      return v2::Code::UNAUTHORIZED;
    case absl::StatusCode::kPermissionDenied:
      return v2::Code::FORBIDDEN;
    default:
      return v2::Code::INTERNAL_ERROR;
  }
}

v2::Status MakeStatus(v2::Code code, const std::string& message) {
  v2::Status s;
  s.set_code(code);
  s.set_message(message);
  return s;
}

v2::Status StatusFromNative(const proto::Response& resp, RpcKind kind) {
  if (!resp.has_status() || resp.status().code() == 0) return OkStatus();
  return MakeStatus(CodeFromNative(resp.status(), kind), resp.status().message());
}

int64_t DurationMs(const google::protobuf::Duration& d) {
  return d.seconds() * 1000 + d.nanos() / 1'000'000;
}

int64_t TimestampMs(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000 + t.nanos() / 1'000'000;
}

void SetDurationMs(int64_t ms, google::protobuf::Duration* out) {
  out->set_seconds(ms / 1000);
  out->set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
}

void SetTimestampMs(int64_t ms, google::protobuf::Timestamp* out) {
  out->set_seconds(ms / 1000);
  out->set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
}

std::string Md5Hex(const std::string& data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_md5(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xF]);
  }
  return out;
}

std::string EncodeRecallHandle(const std::string& message_id, const std::string& native) {
  if (message_id.empty() || message_id.find(':') != std::string::npos) return native;
  return message_id + ":" + native;
}

bool DecodeRecallHandle(const std::string& handle, std::string* message_id, std::string* native) {
  size_t sep = handle.find(':');
  if (sep == std::string::npos) {
    message_id->clear();
    *native = handle;
    return false;
  }
  *message_id = handle.substr(0, sep);
  *native = handle.substr(sep + 1);
  return true;
}

v2::Status CheckMessageGroup(const v2::SystemProperties& sp, const proto::TopicConfig& topic) {
  const bool fifo_topic = topic.type() == proto::FIFO;
  if (!sp.has_message_group()) {
    if (sp.message_type() == v2::MessageType::FIFO) {
      return MakeStatus(v2::Code::ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group");
    }
    if (fifo_topic) {
      return MakeStatus(v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                        "topic '" + topic.name() +
                            "' is a FIFO topic: messages need a message group (messageGroup)");
    }
    return OkStatus();
  }
  const std::string& group = sp.message_group();
  if (group.empty()) {
    return MakeStatus(v2::Code::ILLEGAL_MESSAGE_GROUP, "message group is empty");
  }
  if (group.size() > kMaxMessageGroupBytes) {
    return MakeStatus(v2::Code::ILLEGAL_MESSAGE_GROUP,
                      "message group of " + std::to_string(group.size()) +
                          " bytes exceeds " + std::to_string(kMaxMessageGroupBytes) + " bytes");
  }
  for (char c : group) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      return MakeStatus(v2::Code::ILLEGAL_MESSAGE_GROUP,
                        "message group must not contain control characters");
    }
  }
  if (!fifo_topic) {
    return MakeStatus(v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                      "topic '" + topic.name() + "' is a " + TopicTypeLabel(topic.type()) +
                          " topic: FIFO messages (with a message group) need a FIFO topic");
  }
  return OkStatus();
}

v2::Status CheckHeaderLimits(const proto::SendEntry& entry) {
  HeaderLimit which = HeaderLimit::kNone;
  absl::Status s = CheckMessageHeaders(entry.key(), entry.tag(), entry.properties(), &which);
  if (s.ok()) return OkStatus();
  v2::Code code = v2::Code::MESSAGE_PROPERTIES_TOO_LARGE;
  switch (which) {
    case HeaderLimit::kKey: code = v2::Code::ILLEGAL_MESSAGE_KEY; break;
    case HeaderLimit::kTag: code = v2::Code::ILLEGAL_MESSAGE_TAG; break;
    case HeaderLimit::kPropertyName: code = v2::Code::ILLEGAL_MESSAGE_PROPERTY_KEY; break;
    default: break;
  }
  return MakeStatus(code, std::string(s.message()));
}

void ToRocketMessage(const proto::ReceivedMessage& in, int64_t invisible_ms, v2::Message* out) {
  out->mutable_topic()->set_name(in.topic());
  for (const auto& [k, v] : in.properties()) {
    if (!IsReservedProperty(k)) (*out->mutable_user_properties())[k] = v;
  }
  v2::SystemProperties* sp = out->mutable_system_properties();
  if (!in.tag().empty()) sp->set_tag(in.tag());
  std::string_view keys = in.key();
  while (!keys.empty()) {
    size_t sp_pos = keys.find(' ');
    std::string_view k = keys.substr(0, sp_pos);
    if (!k.empty()) sp->add_keys(std::string(k));
    if (sp_pos == std::string_view::npos) break;
    keys.remove_prefix(sp_pos + 1);
  }
  const std::string* rmq_id = FindProp(in, kRmqMessageId);
  sp->set_message_id(rmq_id != nullptr ? *rmq_id : in.message_id());
  sp->mutable_body_digest()->set_type(v2::DigestType::MD5);
  sp->mutable_body_digest()->set_checksum(Md5Hex(in.body()));
  const std::string* enc = FindProp(in, kRmqBodyEncoding);
  sp->set_body_encoding(enc != nullptr && *enc == "GZIP" ? v2::Encoding::GZIP
                                                         : v2::Encoding::IDENTITY);
  int64_t deliver_at = 0;
  const std::string* deliver = FindProp(in, prop::kDeliverMs);
  const bool delayed = deliver != nullptr && ParseNonNegativeInt64(*deliver, &deliver_at);
  // A message of a FIFO topic carries its group (MSG_GROUP: the sender's group, or the key of a
  // native send without one); the push consumer's FIFO service orders by it.
  const std::string* group = FindProp(in, prop::kMessageGroup);
  if (group != nullptr && !group->empty()) {
    sp->set_message_group(*group);
    // RocketMQ stores the message group as the property __SHARDINGKEY and hands it back as a
    // user property too (the official clients' FIFO tests read it there).
    (*out->mutable_user_properties())[kShardingKeyProperty] = *group;
    sp->set_message_type(v2::MessageType::FIFO);
  } else {
    sp->set_message_type(delayed ? v2::MessageType::DELAY : v2::MessageType::NORMAL);
  }
  SetTimestampMs(in.born_ms(), sp->mutable_born_timestamp());
  const std::string* born_host = FindProp(in, kRmqBornHost);
  sp->set_born_host(born_host != nullptr ? *born_host : "");
  if (in.deliver_ms() > 0) SetTimestampMs(in.deliver_ms(), sp->mutable_store_timestamp());
  sp->set_store_host("tokimq");
  if (delayed) SetTimestampMs(deliver_at, sp->mutable_delivery_timestamp());
  sp->set_receipt_handle(in.receipt_handle());
  sp->set_queue_id(in.queue_id());
  sp->set_queue_offset(in.queue_offset());
  SetDurationMs(invisible_ms, sp->mutable_invisible_duration());
  sp->set_delivery_attempt(in.delivery_attempt());
  const std::string* trace = FindProp(in, kRmqTraceContext);
  if (trace != nullptr) sp->set_trace_context(*trace);
  if (in.topic().rfind("%DLQ%", 0) == 0) {
    const std::string* origin = FindProp(in, prop::kOriginalTopic);
    sp->mutable_dead_letter_queue()->set_topic(origin != nullptr ? *origin : "");
    sp->mutable_dead_letter_queue()->set_message_id(sp->message_id());
  }
  out->set_body(in.body());
}

void AddAcceptedTypes(proto::TopicType type, v2::MessageQueue* mq) {
  switch (type) {
    case proto::FIFO:
      mq->add_accept_message_types(v2::MessageType::FIFO);
      break;
    case proto::TRANSACTION:
      mq->add_accept_message_types(v2::MessageType::TRANSACTION);
      break;
    default:
      mq->add_accept_message_types(v2::MessageType::NORMAL);
      mq->add_accept_message_types(v2::MessageType::DELAY);
      break;
  }
}

}  // namespace tokimq::rocketmq
