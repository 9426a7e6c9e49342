// ConnectionAuth: the authentication state of one native-protocol connection and the gate
// every request passes (docs/protocol.md "Authentication").
//
// With auth on, the handshake answer carries a fresh 32-byte nonce; the client's one
// AuthenticateRequest must carry HMAC-SHA256(secret, nonce ++ handshake client_id)
// (proto/auth_proof.h). The nonce is spent by the first attempt, right or wrong, so a recorded
// proof is worth nothing on another connection or a second try (replay). Until authenticated,
// every request but the handshake is refused with kUnauthenticated; afterwards each request is
// authorized through the permission table (broker/auth/permissions.h), so deleting a user or
// revoking a rule takes effect on open connections at their next request.
//
// Ownership: borrows the AuthStore (null: auth off, everything admitted). Thread-safety: the
// handshake and Authenticate run on the connection's I/O thread before any other request is
// read; Admit and Filter are const and may then run on any thread.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker::auth {

class AuthStore;

class ConnectionAuth {
 public:
  explicit ConnectionAuth(const AuthStore* store) : store_(store) {}

  bool enabled() const { return store_ != nullptr; }
  bool authenticated() const { return !access_key_.empty(); }
  const std::string& access_key() const { return access_key_; }

  // Completes a successful handshake answer: with auth on, auth_required and a new nonce.
  void OnHandshake(const proto::HandshakeRequest& req, proto::HandshakeResponse* resp);
  // Checks the proof. kUnauthenticated ("authentication failed", nothing more) for an unknown
  // or disabled user, a wrong proof, no handshake nonce, a spent nonce or a second attempt;
  // kFailedPrecondition when auth is off.
  absl::Status Authenticate(const proto::AuthenticateRequest& req,
                            proto::AuthenticateResponse* resp);
  // OK when `req` may run on this connection; kUnauthenticated before authentication,
  // kPermissionDenied per the permission table. Handshake: always OK.
  absl::Status Admit(const proto::Request& req) const;
  // Removes what this user may not see from a ListTopics / Stats answer (no-op with auth off).
  void Filter(const proto::Request& req, proto::Response* resp) const;

 private:
  const AuthStore* store_;
  std::string nonce_;       // "" before the handshake and once spent
  std::string client_id_;   // of the handshake
  std::string access_key_;  // "" until authenticated
  bool attempted_ = false;
};

}  // namespace tokimq::broker::auth
