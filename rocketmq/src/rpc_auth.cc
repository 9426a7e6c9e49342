// Authentication and authorization of the RocketMQ gRPC RPCs (issue 17, docs/security.md).
#include "broker/auth/auth_store.h"
#include "broker/auth/rocketmq_signature.h"
#include "broker/broker.h"
#include "common/clock.h"
#include "common/logging.h"
#include "messaging_service.h"
#include "proto/status.h"

namespace tokimq::rocketmq {
namespace {

std::string_view Header(const grpc::ServerContext* ctx, const char* name) {
  auto it = ctx->client_metadata().find(name);
  if (it == ctx->client_metadata().end()) return {};
  return std::string_view(it->second.data(), it->second.size());
}

}  // namespace

std::optional<v2::Status> MessagingServiceImpl::Authenticate(const grpc::ServerContext* ctx,
                                                             std::string* access_key) const {
  access_key->clear();
  if (!broker_->auth_enabled()) return std::nullopt;
  std::string why;
  absl::StatusOr<std::string> who = broker::auth::VerifyRocketMqSignature(
      *broker_->auth_store(), Header(ctx, "authorization"), Header(ctx, "x-mq-date-time"),
      broker_->clock()->NowMs(), &why);
  if (!who.ok()) {
    TOKIMQ_LOG_INFO("rocketmq: refused {}: {}", ctx->peer(), why);
    return MakeStatus(v2::Code::UNAUTHORIZED, std::string(who.status().message()));
  }
  *access_key = std::move(*who);
  return std::nullopt;
}

std::optional<v2::Status> MessagingServiceImpl::Authorize(
    const std::string& access_key,
    const std::vector<broker::auth::Requirement>& requirements) const {
  if (!broker_->auth_enabled()) return std::nullopt;
  absl::Status s =
      broker::auth::CheckRequirements(*broker_->auth_store(), access_key, requirements);
  if (s.ok()) return std::nullopt;
  return MakeStatus(v2::Code::FORBIDDEN, std::string(s.message()));
}

proto::Response MessagingServiceImpl::CallAs(const std::string& access_key,
                                             const proto::Request& req) {
  if (broker_->auth_enabled()) {
    absl::Status s = broker::auth::Authorize(*broker_->auth_store(), access_key, req);
    if (!s.ok()) {
      proto::Response denied;
      wire::ToProto(s, denied.mutable_status());
      return denied;
    }
  }
  return Call(req);
}

}  // namespace tokimq::rocketmq
