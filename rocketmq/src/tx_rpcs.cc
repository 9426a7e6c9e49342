// Transactions over the RocketMQ endpoint (docs/rocketmq-compat.md "Transactions"):
// EndTransaction, and check-backs as RecoverOrphanedTransactionCommand on Telemetry streams.
#include <fmt/format.h>

#include "broker/broker.h"
#include "messaging_service.h"

namespace tokimq::rocketmq {

std::string MessagingServiceImpl::EncodeTransactionId(const std::string& native_message_id,
                                                      const std::string& native_transaction_id) {
  return native_message_id + ":" + native_transaction_id;
}

bool MessagingServiceImpl::DecodeTransactionId(const std::string& id,
                                               std::string* native_message_id,
                                               std::string* native_transaction_id) {
  size_t sep = id.find(':');
  if (sep == std::string::npos || sep == 0 || sep + 1 == id.size()) return false;
  *native_message_id = id.substr(0, sep);
  *native_transaction_id = id.substr(sep + 1);
  return true;
}

v2::TelemetryCommand MessagingServiceImpl::RecoverCommand(const proto::TransactionCheck& check) {
  proto::ReceivedMessage m;
  m.set_message_id(check.message_id());
  m.set_topic(check.topic());
  m.set_body(check.body());
  m.set_key(check.key());
  m.set_tag(check.tag());
  for (const auto& [k, v] : check.properties()) (*m.mutable_properties())[k] = v;
  v2::TelemetryCommand cmd;
  v2::RecoverOrphanedTransactionCommand* rc = cmd.mutable_recover_orphaned_transaction_command();
  ToRocketMessage(m, 0, rc->mutable_message());
  v2::SystemProperties* sp = rc->mutable_message()->mutable_system_properties();
  sp->set_message_type(v2::MessageType::TRANSACTION);
  sp->clear_invisible_duration();
  sp->clear_delivery_timestamp();
  rc->set_transaction_id(EncodeTransactionId(check.message_id(), check.transaction_id()));
  return cmd;
}

bool MessagingServiceImpl::OfferCheck(const proto::TransactionCheck& check) {
  return check_streams_.Offer(check.topic(), RecoverCommand(check));
}

grpc::Status MessagingServiceImpl::EndTransaction(grpc::ServerContext* ctx,
                                                  const v2::EndTransactionRequest* req,
                                                  v2::EndTransactionResponse* resp) {
  std::string who;
  if (!Admit(ctx, &who, resp)) return grpc::Status::OK;
  std::string message_id, transaction_id;
  if (!DecodeTransactionId(req->transaction_id(), &message_id, &transaction_id)) {
    *resp->mutable_status() = MakeStatus(
        v2::Code::INVALID_TRANSACTION_ID,
        fmt::format("transaction id '{}' was not issued by this broker", req->transaction_id()));
    return grpc::Status::OK;
  }
  proto::Request native;
  proto::EndTransactionRequest* e = native.mutable_end_transaction();
  e->set_topic(req->topic().name());
  e->set_message_id(message_id);
  e->set_transaction_id(transaction_id);
  switch (req->resolution()) {
    case v2::TransactionResolution::COMMIT: e->set_resolution(proto::COMMIT); break;
    case v2::TransactionResolution::ROLLBACK: e->set_resolution(proto::ROLLBACK); break;
    default:
      *resp->mutable_status() =
          MakeStatus(v2::Code::BAD_REQUEST, "resolution must be COMMIT or ROLLBACK");
      return grpc::Status::OK;
  }
  e->set_source(req->source() == v2::TransactionSource::SOURCE_SERVER_CHECK
                    ? proto::SOURCE_CHECK
                    : proto::SOURCE_CLIENT);
  proto::Response r = CallAs(who, native);  // pub on the topic (broker/auth/permissions.h)
  *resp->mutable_status() = StatusFromNative(r, RpcKind::kOther);
  return grpc::Status::OK;
}

}  // namespace tokimq::rocketmq
