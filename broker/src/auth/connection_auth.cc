#include "broker/auth/connection_auth.h"

#include "broker/auth/auth_store.h"
#include "broker/auth/permissions.h"
#include "common/hmac.h"
#include "proto/auth_proof.h"

namespace tokimq::broker::auth {

void ConnectionAuth::OnHandshake(const proto::HandshakeRequest& req,
                                 proto::HandshakeResponse* resp) {
  if (!enabled()) return;
  nonce_ = RandomBytes(wire::kAuthNonceBytes);
  client_id_ = req.client_id();
  resp->set_auth_required(true);
  resp->set_auth_nonce(nonce_);
}

absl::Status ConnectionAuth::Authenticate(const proto::AuthenticateRequest& req,
                                          proto::AuthenticateResponse* resp) {
  if (!enabled()) return absl::FailedPreconditionError("authentication is off on this broker");
  const absl::Status failed = absl::UnauthenticatedError("authentication failed");
  if (attempted_ || authenticated() || nonce_.empty()) return failed;
  attempted_ = true;
  const std::string nonce = std::move(nonce_);
  nonce_.clear();
  std::optional<User> user = store_->GetUser(req.access_key());
  // The proof is computed even for an unknown user, so the answer takes as long either way.
  const std::string expected =
      wire::AuthProof(user ? user->secret_key : std::string(32, '\0'), nonce, client_id_);
  if (!ConstantTimeEquals(expected, req.signature()) || !user || !user->enabled) return failed;
  access_key_ = user->access_key;
  resp->set_access_key(access_key_);
  resp->set_super_user(user->type == UserType::kSuper);
  return absl::OkStatus();
}

absl::Status ConnectionAuth::Admit(const proto::Request& req) const {
  if (!enabled() || req.body_case() == proto::Request::kHandshake) return absl::OkStatus();
  if (!authenticated()) return absl::UnauthenticatedError("authentication required");
  return Authorize(*store_, access_key_, req);
}

void ConnectionAuth::Filter(const proto::Request& req, proto::Response* resp) const {
  if (enabled() && authenticated()) FilterResponse(*store_, access_key_, req, resp);
}

}  // namespace tokimq::broker::auth
