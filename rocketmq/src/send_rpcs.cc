// SendMessage and RecallMessage of MessagingServiceImpl.
#include <fmt/format.h>

#include "broker/auth/auth_store.h"
#include "broker/broker.h"
#include "common/clock.h"
#include "error_texts.h"
#include "messaging_service.h"

namespace tokimq::rocketmq {

namespace {

// The message's type against the topic's (lite and priority messages are refused; TRANSACTION
// and FIFO must match the topic), copying the transaction and group fields into *out.
v2::Status CheckMessageType(const v2::SystemProperties& sp, const proto::TopicConfig& topic,
                            proto::SendEntry* out) {
  if (sp.message_type() == v2::MessageType::LITE || sp.has_lite_topic()) {
    return MakeStatus(v2::Code::UNSUPPORTED, "lite topics are not supported by tokimq");
  }
  if (sp.message_type() == v2::MessageType::PRIORITY || sp.has_priority()) {
    return MakeStatus(v2::Code::UNSUPPORTED, "priority messages are not supported by tokimq");
  }
  // Transactions (docs/transactions.md): TRANSACTION messages on TRANSACTION topics only.
  const bool transactional = sp.message_type() == v2::MessageType::TRANSACTION;
  if (transactional != (topic.type() == proto::TRANSACTION)) {
    return MakeStatus(v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                      transactional
                          ? fmt::format("topic '{}' is not a TRANSACTION topic", topic.name())
                          : fmt::format("topic '{}' only accepts transactional messages",
                                        topic.name()));
  }
  if (transactional) {
    out->set_transactional(true);
    if (sp.has_orphaned_transaction_recovery_duration()) {
      out->set_check_immunity_ms(DurationMs(sp.orphaned_transaction_recovery_duration()));
    }
  }
  // FIFO: as RocketMQ's proxy, the message group decides the message's type and the topic's
  // type must match it (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE otherwise). The native broker would
  // take the key as the group of a FIFO message without one; RocketMQ clients always name a
  // group, so a message without one is a type mismatch here.
  v2::Status group_status = CheckMessageGroup(sp, topic);
  if (group_status.code() != v2::Code::OK) return group_status;
  if (sp.has_message_group()) out->set_message_group(sp.message_group());
  return OkStatus();
}

}  // namespace

v2::Status MessagingServiceImpl::PrepareSendEntry(const v2::Message& m,
                                                  const proto::TopicConfig& topic, int64_t now,
                                                  proto::SendEntry* out) const {
  const v2::SystemProperties& sp = m.system_properties();
  if (sp.message_id().empty()) {
    return MakeStatus(v2::Code::ILLEGAL_MESSAGE_ID, "message id is empty");
  }
  v2::Status type_status = CheckMessageType(sp, topic, out);
  if (type_status.code() != v2::Code::OK) return type_status;
  if (static_cast<int64_t>(m.body().size()) > options_.max_body_size) {
    return MakeStatus(v2::Code::MESSAGE_BODY_TOO_LARGE,
                      BodyTooLargeText(static_cast<int64_t>(m.body().size()),
                                       options_.max_body_size));
  }
  if (sp.has_delivery_timestamp()) {
    const int64_t at = TimestampMs(sp.delivery_timestamp());
    const int64_t max_delay = topic.max_delay_ms();
    if (max_delay > 0 && at - now > max_delay) {
      return MakeStatus(v2::Code::ILLEGAL_DELIVERY_TIME,
                        fmt::format("delivery timestamp is {} ms ahead, beyond the max delay of "
                                    "{} ms of topic '{}'",
                                    at - now, max_delay, topic.name()));
    }
    out->set_deliver_at_ms(at);  // in the past: delivered at once
  }
  for (const auto& [k, v] : m.user_properties()) {
    if (IsReservedProperty(k)) {
      return MakeStatus(v2::Code::ILLEGAL_MESSAGE_PROPERTY_KEY,
                        fmt::format("property '{}' is reserved", k));
    }
    (*out->mutable_properties())[k] = v;
  }
  std::string keys;
  for (const std::string& k : sp.keys()) {
    if (k.find(' ') != std::string::npos) {
      return MakeStatus(v2::Code::ILLEGAL_MESSAGE_KEY, "message keys must not contain spaces");
    }
    if (k.empty()) continue;
    if (!keys.empty()) keys.push_back(' ');
    keys += k;
  }
  if (sp.has_tag() && sp.tag().find('|') != std::string::npos) {
    return MakeStatus(v2::Code::ILLEGAL_MESSAGE_TAG, "tags must not contain '|'");
  }
  out->set_topic(m.topic().name());
  out->set_body(m.body());
  out->set_key(keys);
  if (sp.has_tag()) out->set_tag(sp.tag());
  if (sp.has_born_timestamp()) out->set_born_ms(TimestampMs(sp.born_timestamp()));
  auto& props = *out->mutable_properties();
  props[kRmqMessageId] = sp.message_id();
  if (!sp.born_host().empty()) props[kRmqBornHost] = sp.born_host();
  if (sp.has_trace_context()) props[kRmqTraceContext] = sp.trace_context();
  if (sp.body_encoding() == v2::Encoding::GZIP) props[kRmqBodyEncoding] = "GZIP";
  // The native limits on what the broker will store (the broker checks them again), answered
  // with RocketMQ's codes.
  return CheckHeaderLimits(*out);
}

grpc::Status MessagingServiceImpl::SendMessage(grpc::ServerContext* ctx,
                                               const v2::SendMessageRequest* req,
                                               v2::SendMessageResponse* resp) {
  auto fail_all = [&](const v2::Status& s) {
    *resp->mutable_status() = s;
    for (int i = 0; i < req->messages_size(); ++i) {
      v2::SendResultEntry* e = resp->add_entries();
      *e->mutable_status() = s;
      e->set_message_id(req->messages(i).system_properties().message_id());
    }
    return grpc::Status::OK;
  };
  std::string who;
  if (std::optional<v2::Status> refused = Authenticate(ctx, &who)) return fail_all(*refused);
  if (req->messages().empty()) {
    *resp->mutable_status() = MakeStatus(v2::Code::BAD_REQUEST, "no messages to send");
    return grpc::Status::OK;
  }
  const std::string& topic_name = req->messages(0).topic().name();
  for (const v2::Message& m : req->messages()) {
    if (m.topic().name() != topic_name) {
      return fail_all(MakeStatus(v2::Code::BAD_REQUEST, "messages of one request must share a topic"));
    }
  }
  if (auto denied = Authorize(who, {{broker::auth::Resource::Topic(topic_name), broker::auth::kPub}})) {
    return fail_all(*denied);  // before the lookup: no hint whether the topic exists
  }
  v2::Status error;
  std::optional<proto::TopicConfig> topic = LookupTopic(topic_name, &error);
  if (!topic) return fail_all(error);

  proto::Request native;
  proto::SendRequest* send = native.mutable_send();
  const int64_t now = broker_->clock()->NowMs();
  for (const v2::Message& m : req->messages()) {
    v2::Status s = PrepareSendEntry(m, *topic, now, send->add_entries());
    if (s.code() != v2::Code::OK) return fail_all(s);
  }
  proto::Response r = CallAs(who, native);  // pub on the topic
  v2::Status status = StatusFromNative(r, RpcKind::kSend);
  if (clustered() && status.code() == v2::Code::TOPIC_NOT_FOUND) {
    // A cluster topic not placed on this broker (a client with a stale route): name its hosts.
    v2::Status ignored;
    std::optional<proto::RouteResponse> route = LookupRoute(topic_name, &ignored);
    if (route && !HostsTopic(*route, options_.cluster_broker_name)) {
      return fail_all(TopicNotHereStatus(*route, options_.cluster_broker_name));
    }
  }
  UseRocketMqText(&status, RpcKind::kSend, topic_name, "");
  if (status.code() != v2::Code::OK) return fail_all(status);
  if (r.send().results_size() != req->messages_size()) {
    return fail_all(MakeStatus(v2::Code::INTERNAL_ERROR, "broker answered a different count"));
  }
  *resp->mutable_status() = OkStatus();
  for (int i = 0; i < req->messages_size(); ++i) {
    const proto::SendResult& sr = r.send().results(i);
    const std::string& id = req->messages(i).system_properties().message_id();
    v2::SendResultEntry* e = resp->add_entries();
    *e->mutable_status() = OkStatus();
    e->set_message_id(id);
    e->set_offset(sr.queue_offset());
    if (!sr.recall_handle().empty()) {
      // Cluster mode: the handle names this broker ("<id>:<broker>|<handle>"; after the id, the
      // routing clients' form), so any broker can send a RecallMessage on to it.
      e->set_recall_handle(EncodeRecallHandle(
          id, clustered() ? options_.cluster_broker_name + "|" + sr.recall_handle()
                          : sr.recall_handle()));
    }
    // RocketMQ's proxy answers every send with a transaction id; for a message that is not
    // transactional it is the message id (the official clients' tests assert the equality).
    e->set_transaction_id(sr.transaction_id().empty()
                              ? id
                              : EncodeTransactionId(sr.message_id(), sr.transaction_id()));
  }
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::RecallMessage(grpc::ServerContext* ctx,
                                                 const v2::RecallMessageRequest* req,
                                                 v2::RecallMessageResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  // The native recall handle names no topic; the RPC does, and pub on it is what RocketMQ asks.
  if (auto denied = Authorize(
          who, {{broker::auth::Resource::Topic(req->topic().name()), broker::auth::kPub}})) {
    *resp->mutable_status() = *denied;
    return grpc::Status::OK;
  }
  if (req->recall_handle().empty()) {
    *resp->mutable_status() = MakeStatus(v2::Code::BAD_REQUEST, "recall handle is empty");
    return grpc::Status::OK;
  }
  std::string message_id, handle;
  DecodeRecallHandle(req->recall_handle(), &message_id, &handle);
  proto::Request native;
  native.mutable_recall()->set_recall_handle(handle);
  // The broker checks the handle's message is of this topic (pub was checked on it).
  native.mutable_recall()->set_topic(req->topic().name());
  const size_t bar = handle.find('|');
  proto::Response r;
  if (clustered() && bar != std::string::npos &&
      handle.compare(0, bar, options_.cluster_broker_name) != 0) {
    native.mutable_recall()->set_recall_handle(handle.substr(bar + 1));
    r = ForwardRecall(handle.substr(0, bar), who, native);
  } else {
    r = Call(native);  // "<this broker>|<handle>": the ClusterNode strips its name
  }
  *resp->mutable_status() = StatusFromNative(r, RpcKind::kRecall);
  if (resp->status().code() == v2::Code::OK) resp->set_message_id(message_id);
  return grpc::Status::OK;
}

proto::Response MessagingServiceImpl::ForwardRecall(const std::string& owner,
                                                   const std::string& who,
                                                   const proto::Request& native) {
  proto::Response r;
  auto fail = [&](absl::StatusCode code, const std::string& text) {
    r.mutable_status()->set_code(static_cast<int32_t>(code));
    r.mutable_status()->set_message(text);
    return r;
  };
  const std::string& topic = native.recall().topic();
  v2::Status error;
  std::optional<proto::RouteResponse> route = LookupRoute(topic, &error);
  if (!route) return fail(absl::StatusCode::kNotFound, error.message());
  const proto::BrokerRoute* at = nullptr;
  for (const proto::BrokerRoute& b : route->brokers()) {
    if (b.broker() == owner) at = &b;
  }
  if (at == nullptr) {
    return fail(absl::StatusCode::kNotFound,
                fmt::format("recall handle names broker '{}', which does not host topic '{}'",
                            owner, topic));
  }
  if (!at->live() || at->address().empty()) {
    return fail(absl::StatusCode::kUnavailable,
                fmt::format("broker '{}', which holds the message, is not live now: recall it "
                            "once it is back (its scheduled messages wait on its disk)",
                            owner));
  }
  std::string secret;
  if (broker_->auth_enabled()) {
    std::optional<broker::auth::User> user = broker_->auth_store()->GetUser(who);
    if (user) secret = user->secret_key;
  }
  return forwarder_.Forward(owner, at->address(), broker_->auth_enabled() ? who : "", secret,
                            native);
}

}  // namespace tokimq::rocketmq
