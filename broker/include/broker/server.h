// Server: the TCP front end of tokimq-broker (Boost.Asio).
//
// I/O threads read frames, parse them and write responses; requests that never block (acks,
// renewals, nacks, a ready receive) are answered on the I/O thread, the rest run on a worker
// thread pool (Receive may long-poll). With flush = "sync" a Send is stored on the I/O thread
// and answered from the CommitLog's sync thread once its group-commit fsync returned
// (Broker::HandleNoWait): no thread waits for the fsync, so sends from every connection share
// it. With replication = "sync" the same holds for the follower's acknowledgement: sends and
// the requests above are handled on the I/O thread and answered from the replication ack
// tracker (ReplicationService::DeferStateWaits, docs/replication.md "Sync answers without a
// waiting thread").
// One connection pipelines: requests are handled concurrently and responses go back in
// completion order, matched by request id. At most `max_in_flight_per_connection` requests per
// connection are outstanding; beyond that the server stops reading that socket until one
// completes (back-pressure instead of unbounded memory).
//
// Bad input never affects other connections: a length above the frame limit is refused before
// any allocation (error response, then close), bytes that do not parse as a Request get an error
// response and the connection is closed, a request before the handshake or an unknown request
// gets an error response and the connection stays open, a truncated frame just ends the
// connection. See docs/protocol.md.
//
// Lifetime: Start() binds and starts the threads; Stop() stops accepting, closes every
// connection, drains the worker pool and joins all threads. The Broker outlives the Server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tokimq::broker {

class Broker;

// TLS on the native port (issue 17, docs/security.md "TLS"). Persisted nowhere; parsed from
// --tls-mode / tls_mode.
enum class TlsMode {
  kDisabled,    // plaintext only
  kPermissive,  // TLS and plaintext on the same port: a first byte 0x16 (a TLS handshake
                // record) starts TLS, anything else is the plaintext protocol
  kEnforcing,   // TLS only: a plaintext client fails the TLS handshake and is closed
};
// "disabled" / "permissive" / "enforcing"; kInvalidArgument otherwise.
absl::StatusOr<TlsMode> ParseTlsMode(const std::string& text);
const char* TlsModeName(TlsMode mode);

struct ServerOptions {
  std::string bind_address = "127.0.0.1";
  uint16_t port = 10911;  // 0: any free port (see Server::port())
  uint32_t max_frame_bytes = 16u << 20;
  int io_threads = 2;
  int worker_threads = 32;
  int max_in_flight_per_connection = 256;
  // PEM certificate chain and private key, read once by Start() (rotate by restarting).
  // Required unless tls_mode is kDisabled.
  TlsMode tls_mode = TlsMode::kDisabled;
  std::string tls_cert_file;
  std::string tls_key_file;
};

class Server {
 public:
  Server(Broker* broker, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads the TLS certificate (kInvalidArgument if it cannot), binds and listens. kUnavailable
  // if the address cannot be bound.
  absl::Status Start();
  // Idempotent.
  void Stop();
  // The bound port (after Start).
  uint16_t port() const;

 class Impl;  // public only so that the connection class in server.cc can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tokimq::broker
