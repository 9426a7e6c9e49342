// PullMessage, UpdateOffset, GetOffset and QueryOffset of MessagingServiceImpl: offset-based
// consumption (RocketMQ 5's PullConsumer RPCs) over the native Pull / GetOffset / UpdateOffset /
// QueryOffset requests (docs/rocketmq-compat.md "Offset-based consumption").
#include <fmt/format.h>

#include <algorithm>

#include "broker/broker.h"
#include "broker/consumer_service.h"
#include "messaging_service.h"

namespace tokimq::rocketmq {
namespace {

// Messages one PullMessage answers at most when the client asks for more (the native limit).
constexpr int kMaxPullBatch = kMaxReceiveBatch;

// The status of a native offset request: kNotFound for a missing committed offset is
// OFFSET_NOT_FOUND, for a topic TOPIC_NOT_FOUND; a bad SQL92 expression is
// ILLEGAL_FILTER_EXPRESSION.
v2::Status OffsetStatus(const proto::Response& resp) {
  v2::Status s = StatusFromNative(resp, RpcKind::kReceive);
  if (s.code() == v2::Code::TOPIC_NOT_FOUND &&
      s.message().find("has no committed offset") != std::string::npos) {
    s.set_code(v2::Code::OFFSET_NOT_FOUND);
  } else if (s.code() == v2::Code::BAD_REQUEST && s.message().rfind("sql filter: ", 0) == 0) {
    s.set_code(v2::Code::ILLEGAL_FILTER_EXPRESSION);
  }
  return s;
}

// Puts `bad` into the answer's status: true when there was one (the RPC answers with it).
template <typename Response>
bool Refused(const std::optional<v2::Status>& bad, Response* resp) {
  if (bad) *resp->mutable_status() = *bad;
  return bad.has_value();
}

}  // namespace

grpc::Status MessagingServiceImpl::PullMessage(
    grpc::ServerContext* ctx, const v2::PullMessageRequest* req,
    grpc::ServerWriter<v2::PullMessageResponse>* writer) {
  auto answer = [&](const v2::Status& s, std::optional<int64_t> next_offset = std::nullopt) {
    v2::PullMessageResponse r;
    *r.mutable_status() = s;
    writer->Write(r);
    if (next_offset) {
      v2::PullMessageResponse n;
      n.set_next_offset(*next_offset);
      writer->Write(n);
    }
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
  proto::Request native;
  proto::PullRequest* p = native.mutable_pull();
  p->set_group(group);
  p->set_topic(topic);
  p->set_queue_id(req->message_queue().id());
  p->set_offset(req->offset());
  p->set_max_messages(std::min(req->batch_size(), kMaxPullBatch));
  if (req->has_filter_expression()) {
    const v2::FilterExpression& f = req->filter_expression();
    if (f.type() == v2::FilterType::SQL) {
      p->set_filter_type(proto::FILTER_SQL92);
      p->set_filter_expression(f.expression());
    } else {
      p->set_tag_filter(f.expression());
    }
  }
  // long_polling_timeout is not honoured: the answer comes at once (MESSAGE_NOT_FOUND when the
  // queue has nothing new), docs/rocketmq-compat.md.
  proto::Response resp = CallAs(who, native);  // sub on the group and the topic
  v2::Status status = OffsetStatus(resp);
  if (status.code() != v2::Code::OK) return answer(status);
  const proto::PullResponse& got = resp.pull();
  if (got.offset_illegal()) {
    return answer(MakeStatus(v2::Code::ILLEGAL_OFFSET,
                             fmt::format("offset {} is outside [{}, {}]", req->offset(),
                                         got.min_offset(), got.max_offset())),
                  got.next_offset());
  }
  if (got.messages().empty()) {
    return answer(MakeStatus(v2::Code::MESSAGE_NOT_FOUND, "no new message"), got.next_offset());
  }
  // Status first, then the messages, then the next offset.
  v2::PullMessageResponse head;
  *head.mutable_status() = OkStatus();
  bool open = writer->Write(head);
  for (const proto::ReceivedMessage& m : got.messages()) {
    if (!open) break;
    v2::PullMessageResponse item;
    ToRocketMessage(m, 0, item.mutable_message());
    // No lease: no receipt handle, no invisible duration.
    item.mutable_message()->mutable_system_properties()->clear_receipt_handle();
    item.mutable_message()->mutable_system_properties()->clear_invisible_duration();
    open = writer->Write(item);
  }
  if (open) {
    v2::PullMessageResponse tail;
    tail.set_next_offset(got.next_offset());
    writer->Write(tail);
  }
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::UpdateOffset(grpc::ServerContext* ctx,
                                                const v2::UpdateOffsetRequest* req,
                                                v2::UpdateOffsetResponse* resp) {
  std::string who;
  const std::string& group = req->group().name();
  const std::string& topic = req->message_queue().topic().name();
  if (!Admit(ctx, &who, resp) || Refused(QueueRequestError(&group, req->message_queue()), resp)) {
    return grpc::Status::OK;
  }
  if (req->offset() < 0) {
    *resp->mutable_status() = MakeStatus(v2::Code::ILLEGAL_OFFSET, "offset must be >= 0");
    return grpc::Status::OK;
  }
  proto::Request native;
  proto::UpdateOffsetRequest* u = native.mutable_update_offset();
  u->set_group(group);
  u->set_topic(topic);
  u->set_queue_id(req->message_queue().id());
  u->set_offset(req->offset());
  *resp->mutable_status() = OffsetStatus(CallAs(who, native));
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::GetOffset(grpc::ServerContext* ctx,
                                             const v2::GetOffsetRequest* req,
                                             v2::GetOffsetResponse* resp) {
  std::string who;
  const std::string& group = req->group().name();
  const std::string& topic = req->message_queue().topic().name();
  if (!Admit(ctx, &who, resp) || Refused(QueueRequestError(&group, req->message_queue()), resp)) {
    return grpc::Status::OK;
  }
  proto::Request native;
  proto::GetOffsetRequest* g = native.mutable_get_offset();
  g->set_group(group);
  g->set_topic(topic);
  g->set_queue_id(req->message_queue().id());
  proto::Response r = CallAs(who, native);
  *resp->mutable_status() = OffsetStatus(r);
  if (resp->status().code() == v2::Code::OK) resp->set_offset(r.offset().offset());
  return grpc::Status::OK;
}

grpc::Status MessagingServiceImpl::QueryOffset(grpc::ServerContext* ctx,
                                               const v2::QueryOffsetRequest* req,
                                               v2::QueryOffsetResponse* resp) {
  std::string who;
  const std::string& topic = req->message_queue().topic().name();
  if (!Admit(ctx, &who, resp) || Refused(QueueRequestError(nullptr, req->message_queue()), resp)) {
    return grpc::Status::OK;
  }
  proto::Request native;
  proto::QueryOffsetRequest* q = native.mutable_query_offset();
  q->set_topic(topic);
  q->set_queue_id(req->message_queue().id());
  switch (req->query_offset_policy()) {
    case v2::QueryOffsetPolicy::BEGINNING:
      q->set_policy(proto::QueryOffsetRequest::BEGINNING);
      break;
    case v2::QueryOffsetPolicy::END:
      q->set_policy(proto::QueryOffsetRequest::END);
      break;
    case v2::QueryOffsetPolicy::TIMESTAMP:
      if (!req->has_timestamp()) {
        *resp->mutable_status() =
            MakeStatus(v2::Code::BAD_REQUEST, "query offset by TIMESTAMP needs a timestamp");
        return grpc::Status::OK;
      }
      q->set_policy(proto::QueryOffsetRequest::TIMESTAMP);
      q->set_timestamp_ms(TimestampMs(req->timestamp()));
      break;
    default:
      *resp->mutable_status() = MakeStatus(v2::Code::BAD_REQUEST, "unknown query offset policy");
      return grpc::Status::OK;
  }
  proto::Response r = CallAs(who, native);
  *resp->mutable_status() = OffsetStatus(r);
  if (resp->status().code() == v2::Code::OK) resp->set_offset(r.offset().offset());
  return grpc::Status::OK;
}

}  // namespace tokimq::rocketmq
