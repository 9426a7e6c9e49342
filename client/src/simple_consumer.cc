#include "client/simple_consumer.h"

#include "common/coding.h"
#include "common/status.h"
#include "proto/status.h"

namespace tokimq::client {

SimpleConsumer::SimpleConsumer(ClientOptions options, std::string group)
    : conn_(std::move(options)), group_(std::move(group)) {}

absl::StatusOr<std::vector<ReceivedMessage>> SimpleConsumer::Receive(const std::string& topic,
                                                                     const ReceiveOptions& o) {
  return AckAndReceive({}, topic, o, nullptr);
}

absl::StatusOr<std::vector<ReceivedMessage>> SimpleConsumer::AckAndReceive(
    const std::vector<std::string>& ack_handles, const std::string& topic,
    const ReceiveOptions& o, std::vector<absl::Status>* ack_results) {
  if (!ack_handles.empty() && ack_results == nullptr) {
    return absl::InvalidArgumentError("AckAndReceive needs somewhere to put the ack results");
  }
  proto::Request req;
  proto::ReceiveRequest* r = req.mutable_receive();
  r->set_group(group_);
  r->set_topic(topic);
  r->set_max_messages(o.max_messages);
  r->set_invisible_ms(o.invisible_ms);
  r->set_long_poll_ms(o.long_poll_ms);
  r->set_tag_filter(o.tag_filter);
  if (!o.sql_filter.empty()) {
    r->set_filter_type(proto::FILTER_SQL92);
    r->set_filter_expression(o.sql_filter);
  }
  r->set_encoded_properties(true);
  if (o.max_per_group != 1) r->set_max_per_group(o.max_per_group);
  for (const std::string& h : ack_handles) r->add_ack_receipt_handles(h);
  auto resp = conn_.Call(std::move(req), o.long_poll_ms);
  if (!resp.ok()) return resp.status();
  if (!ack_handles.empty()) {
    const auto& acked = resp->receive().ack_results();
    ack_results->clear();
    if (acked.empty()) {
      // A broker that predates ack_receipt_handles ignored them (unknown field): ack here.
      TOKIMQ_ASSIGN_OR_RETURN(*ack_results, AckBatch(ack_handles));
    } else if (static_cast<size_t>(acked.size()) != ack_handles.size()) {
      return absl::InternalError(
          "broker answered a receive's acks with the wrong number of results");
    } else {
      ack_results->reserve(ack_handles.size());
      for (const proto::Status& s : acked) ack_results->push_back(wire::FromProto(s));
    }
  }
  std::vector<ReceivedMessage> out;
  auto& got = *resp->mutable_receive()->mutable_messages();
  out.reserve(static_cast<size_t>(got.size()));
  for (proto::ReceivedMessage& m : got) {
    ReceivedMessage rm;
    rm.message_id = std::move(*m.mutable_message_id());
    rm.topic = std::move(*m.mutable_topic());
    rm.queue_id = m.queue_id();
    rm.queue_offset = QueueOffset(m.queue_offset());
    rm.body = std::move(*m.mutable_body());
    rm.key = std::move(*m.mutable_key());
    rm.tag = std::move(*m.mutable_tag());
    // Encoded (ReceiveRequest.encoded_properties), or the map from a broker that predates it.
    Decoder pd(m.properties_encoded());
    std::string_view k, v;
    while (pd.GetLengthPrefixed(&k)) {
      if (!pd.GetLengthPrefixed(&v)) break;
      rm.properties.emplace(std::string(k), std::string(v));  // the first of a key counts
    }
    if (pd.remaining() != 0) {
      return absl::DataLossError("broker sent malformed encoded properties");
    }
    rm.properties.insert(m.properties().begin(), m.properties().end());
    rm.born_ms = m.born_ms();
    rm.receipt_handle = std::move(*m.mutable_receipt_handle());
    rm.delivery_attempt = m.delivery_attempt();
    rm.deliver_ms = m.deliver_ms();
    rm.invisible_until_ms = m.invisible_until_ms();
    out.push_back(std::move(rm));
  }
  return out;
}

absl::StatusOr<std::vector<absl::Status>> SimpleConsumer::AckBatch(
    const std::vector<std::string>& handles) {
  proto::Request req;
  req.mutable_ack()->set_group(group_);
  for (const std::string& h : handles) req.mutable_ack()->add_receipt_handles(h);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  std::vector<absl::Status> out;
  for (const proto::Status& s : resp->ack().results()) out.push_back(wire::FromProto(s));
  if (out.size() != handles.size()) {
    return absl::InternalError("broker answered an ack with the wrong number of results");
  }
  return out;
}

absl::Status SimpleConsumer::Ack(const std::string& receipt_handle) {
  auto results = AckBatch({receipt_handle});
  if (!results.ok()) return results.status();
  return results->front();
}

absl::StatusOr<std::string> SimpleConsumer::ChangeInvisibleDuration(
    const std::string& receipt_handle, int64_t invisible_ms) {
  proto::Request req;
  auto* r = req.mutable_change_invisible_duration();
  r->set_group(group_);
  r->set_receipt_handle(receipt_handle);
  r->set_invisible_ms(invisible_ms);
  auto resp = conn_.Call(std::move(req));
  if (!resp.ok()) return resp.status();
  return resp->change_invisible_duration().receipt_handle();
}

absl::Status SimpleConsumer::Nack(const std::string& receipt_handle,
                                  std::optional<int64_t> delay_ms) {
  proto::Request req;
  auto* r = req.mutable_nack();
  r->set_group(group_);
  r->set_receipt_handle(receipt_handle);
  if (delay_ms) r->set_delay_ms(*delay_ms);
  return conn_.Call(std::move(req)).status();
}

}  // namespace tokimq::client
