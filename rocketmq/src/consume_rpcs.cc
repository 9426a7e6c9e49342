// ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue of
// MessagingServiceImpl.
#include <fmt/format.h>

#include <algorithm>

#include "broker/broker.h"
#include "broker/consumer_service.h"
#include "commitlog/message.h"
#include "common/clock.h"
#include "common/logging.h"
#include "error_texts.h"
#include "messaging_service.h"
#include "timerstore/timer_store.h"

namespace tokimq::rocketmq {

grpc::Status MessagingServiceImpl::ReceiveMessage(
    grpc::ServerContext* ctx, const v2::ReceiveMessageRequest* req,
    grpc::ServerWriter<v2::ReceiveMessageResponse>* writer) {
  auto answer = [&](const v2::Status& s) {
    v2::ReceiveMessageResponse r;
    *r.mutable_status() = s;
    writer->Write(r);
    return grpc::Status::OK;
  };
  std::string who;
  if (std::optional<v2::Status> refused = Authenticate(ctx, &who)) return answer(*refused);
  const std::string& group = req->group().name();
  const std::string& topic = req->message_queue().topic().name();
  if (auto bad = QueueRequestError(&group, req->message_queue())) return answer(*bad);
  if (req->batch_size() <= 0) {
    return answer(MakeStatus(v2::Code::BAD_REQUEST, "batch size must be > 0"));
  }
  std::string tag_filter;
  std::string sql_filter;
  const bool sql = req->has_filter_expression() &&
                   req->filter_expression().type() == v2::FilterType::SQL;
  if (sql) {
    // Parsed and evaluated by the broker (docs/rocketmq-compat.md "SQL92 filters").
    sql_filter = req->filter_expression().expression();
  } else if (req->has_filter_expression()) {
    tag_filter = req->filter_expression().expression();
  }
  int64_t invisible_ms = options_.default_invisible_ms;
  if (req->has_invisible_duration()) {
    invisible_ms = DurationMs(req->invisible_duration());
    if (invisible_ms <= 0 || invisible_ms > options_.max_invisible_ms) {
      return answer(MakeStatus(v2::Code::ILLEGAL_INVISIBLE_TIME,
                               InvisibleTimeText(invisible_ms, 1, options_.max_invisible_ms)));
    }
  }
  int64_t long_poll_ms = 0;
  if (req->has_long_polling_timeout()) {
    long_poll_ms = DurationMs(req->long_polling_timeout());
    if (long_poll_ms < 0) {
      return answer(MakeStatus(v2::Code::ILLEGAL_POLLING_TIME, "long polling timeout < 0"));
    }
  }

  proto::Request native;
  proto::ReceiveRequest* r = native.mutable_receive();
  r->set_group(group);
  r->set_topic(topic);  // all queues: the requested queue id is only the client's bookkeeping
  r->set_max_messages(std::min(req->batch_size(), kMaxReceiveBatch));
  r->set_invisible_ms(invisible_ms);
  r->set_long_poll_ms(long_poll_ms);
  r->set_tag_filter(tag_filter);
  // A group without a stored delivery order is Concurrently here (RocketMQ's default); only a
  // group created orderly consumes FIFO topics in message-group order.
  r->set_default_order(proto::CONCURRENTLY);
  if (sql) {
    r->set_filter_type(proto::FILTER_SQL92);
    r->set_filter_expression(sql_filter);
  }
  const std::string client = ClientIdOf(ctx);
  proto::Response resp = CallAs(who, native);  // sub on the group and the topic
  v2::Status status = StatusFromNative(resp, RpcKind::kReceive);
  if (sql && status.code() == v2::Code::BAD_REQUEST &&
      status.message().rfind("sql filter: ", 0) == 0) {
    // RocketMQ's proxy answers a bad SQL92 expression with ILLEGAL_FILTER_EXPRESSION.
    status.set_code(v2::Code::ILLEGAL_FILTER_EXPRESSION);
  }
  UseRocketMqText(&status, RpcKind::kReceive, topic, group);
  if (status.code() != v2::Code::OK) return answer(status);
  const auto& got = resp.receive().messages();
  if (got.empty()) return answer(MakeStatus(v2::Code::MESSAGE_NOT_FOUND, "no new message"));

  // Status first, then the messages, then the delivery timestamp (what the clients expect).
  v2::ReceiveMessageResponse head;
  *head.mutable_status() = OkStatus();
  bool open = writer->Write(head);
  for (const proto::ReceivedMessage& m : got) {
    in_flight_.Put(m.receipt_handle(), m);
    // PushConsumers (auto_renew): the broker keeps the lease alive while the listener runs.
    if (req->auto_renew()) {
      renewer_.Track(client, group, m.receipt_handle(), m.invisible_until_ms());
    }
    if (!open) continue;  // leases stay; the messages come back when they expire
    v2::ReceiveMessageResponse item;
    ToRocketMessage(m, invisible_ms, item.mutable_message());
    open = writer->Write(item);
  }
  if (open) {
    v2::ReceiveMessageResponse tail;
    SetTimestampMs(broker_->clock()->NowMs(), tail.mutable_delivery_timestamp());
    writer->Write(tail);
  } else {
    TOKIMQ_LOG_WARN("rocketmq: receive stream of group {} closed with {} leased messages", group,
                    got.size());
  }
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::AckMessage(grpc::ServerContext* ctx,
                                              const v2::AckMessageRequest* req,
                                              v2::AckMessageResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  if (auto bad = GroupNameError(req->group().name())) {
    *resp->mutable_status() = *bad;
    return grpc::Status::OK;
  }
  if (req->entries().empty()) {
    *resp->mutable_status() = MakeStatus(v2::Code::BAD_REQUEST, "no entries to ack");
    return grpc::Status::OK;
  }
  std::vector<std::string> handles;
  handles.reserve(req->entries_size());
  for (const v2::AckMessageEntry& e : req->entries()) handles.push_back(e.receipt_handle());
  // Handles of auto-renewed messages are translated to their current lease (auto_renew.cc).
  proto::Response r = AckResolved(who, req->group().name(), handles);
  v2::Status status = StatusFromNative(r, RpcKind::kReceipt);
  if (status.code() != v2::Code::OK || r.ack().results_size() != req->entries_size()) {
    if (status.code() == v2::Code::OK) {
      status = MakeStatus(v2::Code::INTERNAL_ERROR, "broker answered a different count");
    }
    *resp->mutable_status() = status;
    for (const v2::AckMessageEntry& e : req->entries()) {
      v2::AckMessageResultEntry* out = resp->add_entries();
      out->set_message_id(e.message_id());
      out->set_receipt_handle(e.receipt_handle());
      *out->mutable_status() = status;
    }
    return grpc::Status::OK;
  }
  int failed = 0;
  v2::Status first_failure;
  for (int i = 0; i < req->entries_size(); ++i) {
    const v2::AckMessageEntry& e = req->entries(i);
    const proto::Status& ns = r.ack().results(i);
    v2::AckMessageResultEntry* out = resp->add_entries();
    out->set_message_id(e.message_id());
    out->set_receipt_handle(e.receipt_handle());
    if (ns.code() == 0) {
      *out->mutable_status() = OkStatus();
      in_flight_.Erase(e.receipt_handle());
    } else {
      *out->mutable_status() = MakeStatus(CodeFromNative(ns, RpcKind::kReceipt), ns.message());
      if (failed++ == 0) first_failure = out->status();
    }
  }
  if (failed == 0) {
    *resp->mutable_status() = OkStatus();
  } else if (failed == req->entries_size()) {
    *resp->mutable_status() = first_failure;
  } else {
    *resp->mutable_status() = MakeStatus(
        v2::Code::MULTIPLE_RESULTS, fmt::format("{} of {} acks failed", failed, req->entries_size()));
  }
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::ChangeInvisibleDuration(
    grpc::ServerContext* ctx, const v2::ChangeInvisibleDurationRequest* req,
    v2::ChangeInvisibleDurationResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  if (auto bad = GroupNameError(req->group().name())) {
    *resp->mutable_status() = *bad;
    return grpc::Status::OK;
  }
  if (req->receipt_handle().empty()) {
    *resp->mutable_status() = MakeStatus(v2::Code::INVALID_RECEIPT_HANDLE, "receipt handle is empty");
    return grpc::Status::OK;
  }
  const int64_t ms = DurationMs(req->invisible_duration());
  if (ms < 0 || ms > options_.max_invisible_ms) {
    *resp->mutable_status() = MakeStatus(v2::Code::ILLEGAL_INVISIBLE_TIME,
                                         InvisibleTimeText(ms, 0, options_.max_invisible_ms));
    return grpc::Status::OK;
  }
  proto::Request native;
  if (ms == 0) {
    // "Visible again now" (a NACK without backoff): the native NACK with delay 0. The message
    // comes back with attempt + 1; the old handle is returned but no longer acks.
    proto::NackRequest* nack = native.mutable_nack();
    nack->set_group(req->group().name());
    nack->set_receipt_handle(renewer_.Resolve(req->receipt_handle()));
    nack->set_delay_ms(0);
  } else {
    proto::ChangeInvisibleDurationRequest* c = native.mutable_change_invisible_duration();
    c->set_group(req->group().name());
    c->set_receipt_handle(renewer_.Resolve(req->receipt_handle()));
    c->set_invisible_ms(ms);
  }
  proto::Response r = CallAs(who, native);
  *resp->mutable_status() = StatusFromNative(r, RpcKind::kReceipt);
  if (resp->status().code() != v2::Code::OK) return grpc::Status::OK;
  // The client took the lease over (a push consumer's NACK): no more server-side renewal.
  renewer_.Forget(req->receipt_handle());
  if (ms == 0) {
    in_flight_.Erase(req->receipt_handle());
    resp->set_receipt_handle(req->receipt_handle());
  } else {
    const std::string& fresh = r.change_invisible_duration().receipt_handle();
    in_flight_.Rename(req->receipt_handle(), fresh);
    resp->set_receipt_handle(fresh);
  }
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::ForwardMessageToDeadLetterQueue(
    grpc::ServerContext* ctx, const v2::ForwardMessageToDeadLetterQueueRequest* req,
    v2::ForwardMessageToDeadLetterQueueResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  // RocketMQ's table: sub on the group and the topic (the DLQ copy is the broker's own write).
  if (auto denied = Authorize(
          who, {{broker::auth::Resource::Group(req->group().name()), broker::auth::kSub},
                {broker::auth::Resource::Topic(req->topic().name()), broker::auth::kSub}})) {
    *resp->mutable_status() = *denied;
    return grpc::Status::OK;
  }
  const std::string& group = req->group().name();
  if (auto bad = GroupNameError(group)) {
    *resp->mutable_status() = *bad;
    return grpc::Status::OK;
  }
  std::optional<proto::ReceivedMessage> m = in_flight_.Get(req->receipt_handle());
  if (!m) {
    // Not cached (evicted, or received before a restart): hand the message back to the
    // broker's retry policy, which moves it to the DLQ after the group's max attempts.
    proto::Request nack;
    nack.mutable_nack()->set_group(group);
    nack.mutable_nack()->set_receipt_handle(renewer_.Resolve(req->receipt_handle()));
    proto::Response r = Call(nack);
    *resp->mutable_status() = StatusFromNative(r, RpcKind::kReceipt);
    if (resp->status().code() == v2::Code::OK) renewer_.Forget(req->receipt_handle());
    TOKIMQ_LOG_WARN("rocketmq: DLQ forward of {} in group {}: message not cached, NACKed instead",
                    req->message_id(), group);
    return grpc::Status::OK;
  }
  // Copy into %DLQ%<group> first, then ACK: a failed ACK (stale handle) leaves a duplicate in
  // the DLQ rather than losing the message.
  proto::Request send;
  proto::SendEntry* e = send.mutable_send()->add_entries();
  e->set_topic(std::string("%DLQ%") + group);
  e->set_body(m->body());
  e->set_key(m->key());
  e->set_tag(m->tag());
  e->set_born_ms(m->born_ms());
  for (const auto& [k, v] : m->properties()) {
    if (k == prop::kKeys || k == prop::kTag || k == prop::kMessageId) continue;
    // Timer-internal keys are refused in a send (a delivered timer copy carries
    // TIMER_SRC_OFFSET; in the DLQ copy it would mean nothing anyway).
    if (k == kTimerDeleteOf || k == kTimerSourceOffset) continue;
    (*e->mutable_properties())[k] = v;
  }
  (*e->mutable_properties())[prop::kOriginalTopic] = m->topic();
  (*e->mutable_properties())[prop::kDeliveryAttempt] = std::to_string(m->delivery_attempt());
  proto::Response sr = Call(send);
  v2::Status status = StatusFromNative(sr, RpcKind::kOther);
  if (status.code() != v2::Code::OK) {
    *resp->mutable_status() = status;
    return grpc::Status::OK;
  }
  proto::Request ack;
  ack.mutable_ack()->set_group(group);
  ack.mutable_ack()->add_receipt_handles(renewer_.Resolve(req->receipt_handle()));
  proto::Response ar = Call(ack);
  status = StatusFromNative(ar, RpcKind::kReceipt);
  if (status.code() == v2::Code::OK && ar.ack().results_size() == 1 &&
      ar.ack().results(0).code() != 0) {
    status = MakeStatus(CodeFromNative(ar.ack().results(0), RpcKind::kReceipt),
                        ar.ack().results(0).message());
  }
  if (status.code() == v2::Code::OK) {
    in_flight_.Erase(req->receipt_handle());
    renewer_.Forget(req->receipt_handle());
  }
  *resp->mutable_status() = status;
  return grpc::Status::OK;
}

}  // namespace tokimq::rocketmq
