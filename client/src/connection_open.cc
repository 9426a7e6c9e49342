// Opening a Connection (dial, TLS, handshake, authentication) and ConnectionHolder, which opens
// a new one when the last broke. The request pipeline itself is connection.cc.
#include "client/connection.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include "dial.h"
#include "fmt/format.h"
#include "proto/auth_proof.h"
#include "proto/framing.h"
#include "tls_session.h"

namespace tokimq::client {

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const ClientOptions& options) {
  auto fd = DialTcp(options.broker, options.connect_timeout_ms);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<TlsSession> tls;
  if (options.tls) {
    const std::string host = options.tls_server_name.empty()
                                 ? SplitHostPort(options.broker)->first
                                 : options.tls_server_name;
    auto session =
        TlsSession::Connect(*fd, host, options.tls_ca_file, options.connect_timeout_ms);
    if (!session.ok()) {
      ::close(*fd);
      return session.status();
    }
    tls = std::move(*session);
  }
  int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    absl::Status s = ErrnoUnavailable("eventfd");
    ::close(*fd);
    return s;
  }
  std::unique_ptr<Connection> conn(new Connection(*fd, wake_fd, options, std::move(tls)));
  proto::Request req;
  req.mutable_handshake()->set_protocol_version(wire::kProtocolVersion);
  req.mutable_handshake()->set_client_id(options.client_id);
  req.mutable_handshake()->set_resource_namespace(options.namespace_);
  auto resp = conn->Call(std::move(req), options.connect_timeout_ms);
  if (!resp.ok()) return resp.status();
  conn->handshake_ = resp->handshake();
  if (conn->handshake_.resource_namespace() != options.namespace_) {
    // A broker from before namespaces ignores the field: its names would be the global ones.
    return absl::FailedPreconditionError(fmt::format(
        "broker {} does not support namespaces (asked for '{}')", options.broker,
        options.namespace_));
  }
  if (conn->handshake_.auth_required()) {
    if (options.access_key.empty()) {
      return absl::UnauthenticatedError(fmt::format(
          "broker {} requires authentication: give an access key and a secret key",
          options.broker));
    }
    proto::Request auth;
    auth.mutable_authenticate()->set_access_key(options.access_key);
    auth.mutable_authenticate()->set_signature(
        wire::AuthProof(options.secret_key, conn->handshake_.auth_nonce(), options.client_id));
    auto authed = conn->Call(std::move(auth), options.connect_timeout_ms);
    if (!authed.ok()) return authed.status();
  }
  return conn;
}

absl::StatusOr<std::shared_ptr<Connection>> ConnectionHolder::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_ && !conn_->broken()) return conn_;
  auto conn = Connection::Open(options_);
  if (!conn.ok()) return conn.status();
  conn_ = std::shared_ptr<Connection>(std::move(*conn));
  return conn_;
}

absl::StatusOr<proto::Response> ConnectionHolder::Call(proto::Request req, int64_t extra_timeout_ms) {
  auto conn = Get();
  if (!conn.ok()) return conn.status();
  return (*conn)->Call(std::move(req), options_.request_timeout_ms + extra_timeout_ms);
}

}  // namespace tokimq::client
