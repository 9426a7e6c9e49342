// Broker::HandleReceive and HandleReceiveFrame: receive request validation, the lease receive
// through the ConsumerService, and the response built from the stored records.
#include <algorithm>

#include "broker/broker.h"
#include "commitlog/record.h"
#include "common/coding.h"
#include "common/status.h"
#include "consumer/message_filter.h"
#include "fmt/format.h"
#include "proto/status.h"
#include "receive_encoder.h"
#include "replication/replication_service.h"

namespace tokimq::broker {

absl::StatusOr<std::shared_ptr<const consumer::SqlFilter>> Broker::ValidateReceive(
    const proto::ReceiveRequest& req) {
  if (req.group().empty()) return absl::InvalidArgumentError("receive needs a consumer group");
  TOKIMQ_RETURN_IF_ERROR(ResolveTopic(req.topic()).status());
  if (req.max_messages() < 0 || req.max_messages() > kMaxReceiveBatch) {
    return absl::InvalidArgumentError(fmt::format("max messages must be 1..{}", kMaxReceiveBatch));
  }
  if (req.max_per_group() < 0 || req.max_per_group() > kMaxReceiveBatch) {
    return absl::InvalidArgumentError(
        fmt::format("max per group must be 0..{} (0: 1)", kMaxReceiveBatch));
  }
  if (req.invisible_ms() < 0 || req.long_poll_ms() < 0) {
    return absl::InvalidArgumentError("durations must be >= 0");
  }
  if (!proto::FilterType_IsValid(req.filter_type())) {
    return absl::InvalidArgumentError(
        fmt::format("unknown filter type {}", static_cast<int>(req.filter_type())));
  }
  return consumer::RequestSqlFilter(req.filter_type() == proto::FILTER_SQL92,
                                    req.filter_expression());
}

absl::StatusOr<std::vector<absl::Status>> Broker::ApplyReceiveAcks(
    const proto::ReceiveRequest& req) {
  if (req.ack_receipt_handles_size() > kMaxReceiveBatch) {
    return absl::InvalidArgumentError(
        fmt::format("a receive carries at most {} acks", kMaxReceiveBatch));
  }
  TOKIMQ_RETURN_IF_ERROR(replication_->CheckWritable());
  TOKIMQ_RETURN_IF_ERROR(ValidateReceive(req).status());
  return AckHandles(req.group(), req.ack_receipt_handles());
}

absl::StatusOr<std::vector<absl::Status>> Broker::TakeReceiveAcks(proto::ReceiveRequest* req) {
  absl::StatusOr<std::vector<absl::Status>> results = ApplyReceiveAcks(*req);
  req->clear_ack_receipt_handles();
  return results;
}

absl::StatusOr<std::vector<ReceivedMessage>> Broker::ReceiveFor(
    const proto::ReceiveRequest& req) {
  TOKIMQ_ASSIGN_OR_RETURN(std::shared_ptr<const consumer::SqlFilter> sql, ValidateReceive(req));
  RememberSubscription(req.group(), req.topic());
  ReceiveRequest r;
  r.group = req.group();
  r.topic = req.topic();
  r.max_messages = req.max_messages() == 0 ? 16 : req.max_messages();
  r.invisible_ms = req.invisible_ms() == 0 ? 30'000 : req.invisible_ms();
  r.long_poll_ms = std::min(req.long_poll_ms(), options_.max_long_poll_ms);
  r.tag_filter = req.tag_filter();
  r.sql_filter = std::move(sql);
  r.max_per_group = std::max(req.max_per_group(), 1);
  r.orderly_by_default = req.default_order() != proto::CONCURRENTLY;
  // Stored records straight into the response: no decoded Message in between.
  r.raw_records = true;
  // A response must fit a frame (16 MiB by default on both sides): several near-maximum
  // messages in one response would exceed it, and the client would refuse every such response
  // while the messages stayed leased. Half the default frame leaves room for the fields.
  r.max_bytes = kMaxReceiveResponseBytes;
  // And one message alone must fit: a message stored before the key/tag/property limits could
  // exceed the frame (an 8.5 MiB key is in the answer twice) and would stay leased forever.
  r.max_message_bytes = options_.max_frame_bytes;
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<ReceivedMessage> got, consumers_->Receive(r));
  // replication = "sync": the leases are answered once a follower holds them (else a failover
  // would hand the messages out again at once).
  if (!got.empty()) TOKIMQ_RETURN_IF_ERROR(replication_->AwaitStateReplicated());
  return got;
}

namespace {
// The response fields of one received message, as views into its record and `rm`.
absl::Status FieldsOf(const ReceivedMessage& rm, ReceivedFields* f) {
  record::RecordView m;
  // Read and checksummed by the store a moment ago; a failure here is a bug, not bad data.
  TOKIMQ_RETURN_IF_ERROR(record::DecodeCopiedView(rm.record, &m));
  m.FindProperty(prop::kMessageId, &f->message_id);
  m.FindProperty(prop::kKeys, &f->key);
  m.FindProperty(prop::kTag, &f->tag);
  f->topic = m.topic;
  f->queue_id = m.queue_id;
  f->queue_offset = m.queue_offset.value();
  f->body = m.body;
  f->born_ms = m.born_ms;
  f->receipt_handle = rm.receipt_handle;
  f->delivery_attempt = rm.delivery_attempt;
  f->deliver_ms = rm.deliver_ms;
  f->invisible_until_ms = rm.invisible_until_ms;
  f->properties_encoded = m.properties;
  return absl::OkStatus();
}
}  // namespace

absl::Status Broker::HandleReceive(const proto::ReceiveRequest& req,
                                   proto::ReceiveResponse* resp) {
  // Acks not taken by the caller (Connection takes them first, TakeReceiveAcks): applied here.
  std::vector<absl::Status> acks;
  if (req.ack_receipt_handles_size() > 0) {
    TOKIMQ_ASSIGN_OR_RETURN(acks, ApplyReceiveAcks(req));
  }
  TOKIMQ_ASSIGN_OR_RETURN(std::vector<ReceivedMessage> got, ReceiveFor(req));
  resp->mutable_ack_results()->Reserve(static_cast<int>(acks.size()));
  for (const absl::Status& s : acks) wire::ToProto(s, resp->add_ack_results());
  resp->mutable_messages()->Reserve(static_cast<int>(got.size()));
  for (ReceivedMessage& rm : got) {
    ReceivedFields f;
    TOKIMQ_RETURN_IF_ERROR(FieldsOf(rm, &f));
    proto::ReceivedMessage* out = resp->add_messages();
    out->set_message_id(f.message_id.data(), f.message_id.size());
    out->set_topic(f.topic.data(), f.topic.size());
    out->set_queue_id(f.queue_id);
    out->set_queue_offset(f.queue_offset);
    out->set_key(f.key.data(), f.key.size());
    out->set_tag(f.tag.data(), f.tag.size());
    if (req.encoded_properties()) {
      // The stored bytes as they are (callgrind: building and serializing the map was ~10 %
      // of a lease receive + ack).
      out->set_properties_encoded(f.properties_encoded.data(), f.properties_encoded.size());
    } else {
      auto* props = out->mutable_properties();
      Decoder pd(f.properties_encoded);
      std::string_view k, v;
      while (pd.GetLengthPrefixed(&k) && pd.GetLengthPrefixed(&v)) {
        props->insert({std::string(k), std::string(v)});  // one lookup; the first one wins
      }
    }
    out->set_born_ms(f.born_ms);
    out->set_receipt_handle(std::move(rm.receipt_handle));
    out->set_delivery_attempt(f.delivery_attempt);
    out->set_deliver_ms(f.deliver_ms);
    out->set_invisible_until_ms(f.invisible_until_ms);
    out->set_body(f.body.data(), f.body.size());
  }
  return absl::OkStatus();
}

std::optional<Broker::EncodedResponse> Broker::HandleReceiveFrame(
    const proto::Request& req, const std::vector<absl::Status>* ack_results) {
  if (req.body_case() != proto::Request::kReceive || !req.receive().encoded_properties() ||
      req.receive().ack_receipt_handles_size() > 0) {
    return std::nullopt;
  }
  // On a failure after the receive (never expected), the messages leased here are redelivered
  // when their leases expire.
  EncodedResponse out;
  // The follower check Handle makes for every request that writes (docs/replication.md).
  if (absl::Status w = replication_->CheckWritable(); !w.ok()) {
    out.status = w;
    return out;
  }
  absl::StatusOr<std::vector<ReceivedMessage>> got = ReceiveFor(req.receive());
  if (!got.ok()) {
    out.status = got.status();
    return out;
  }
  std::vector<ReceivedFields> fields(got->size());
  for (size_t i = 0; i < got->size(); ++i) {
    out.status = FieldsOf((*got)[i], &fields[i]);
    if (!out.status.ok()) return out;
  }
  std::string tail;  // ReceiveResponse.ack_results, appended after the messages
  if (ack_results != nullptr && !ack_results->empty()) {
    proto::ReceiveResponse acks;
    acks.mutable_ack_results()->Reserve(static_cast<int>(ack_results->size()));
    for (const absl::Status& s : *ack_results) wire::ToProto(s, acks.add_ack_results());
    tail = acks.SerializeAsString();
  }
  out.frame = EncodeReceiveFrame(req.id(), fields, tail);
  out.messages = static_cast<int>(fields.size());
  if (out.frame.empty()) out.status = absl::InternalError("receive response encoding failed");
  return out;
}

}  // namespace tokimq::broker
