// Connection: one pipelined TCP connection to a tokimq broker (native protocol, docs/protocol.md).
//
// Many requests may be outstanding at once; each gets a fresh request id and its callback runs
// when the response with that id arrives, when its timeout passes (kDeadlineExceeded), or when
// the connection breaks (kUnavailable). A broken connection is not reused: Connection::Open
// makes a new one (the Client wrappers do this on the next call).
//
// Threads: Call/CallAsync may be used from any thread. One reader thread per connection reads
// responses and runs callbacks; callbacks must not block (hand work to another thread). Writes
// are serialised by a mutex. The destructor fails outstanding calls with kCancelled and joins
// the reader thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "proto/tokimq.pb.h"

namespace tokimq::client {

struct ClientOptions {
  std::string broker = "127.0.0.1:10911";  // host:port
  int64_t connect_timeout_ms = 5'000;
  int64_t request_timeout_ms = 10'000;     // per request; Receive adds its long-poll time
  uint32_t max_frame_bytes = 16u << 20;
  std::string client_id = "tokimq-cpp";
};

using ResponseCallback = std::function<void(absl::StatusOr<proto::Response>)>;

class Connection {
 public:
  // Connects and performs the handshake. kUnavailable if the broker cannot be reached,
  // kFailedPrecondition if it refuses the protocol version.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const ClientOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `req` (its id is overwritten). The callback gets the response, which may itself carry
  // an error status (see Call for the unwrapped form), or a transport error.
  void CallAsync(proto::Request req, int64_t timeout_ms, ResponseCallback done);
  // Blocking form: the broker's error status is returned as an absl::Status (text preserved).
  absl::StatusOr<proto::Response> Call(proto::Request req, int64_t timeout_ms);

  bool broken() const { return broken_.load(); }
  const proto::HandshakeResponse& handshake() const { return handshake_; }

 private:
  Connection(int fd, ClientOptions options);
  void ReadLoop();
  void FailAll(const absl::Status& s);
  void ExpireDeadlines();
  // Reads exactly n bytes, polling so that deadlines keep being checked. False on EOF/error.
  // Reads what is available (at least 1 byte, at most `cap`) into `buf`, waiting for it; false
  // with *error when the connection fails or is closed. Expires deadlines while waiting.
  bool ReadSome(char* buf, size_t cap, size_t* got, absl::Status* error);

  struct Pending {
    ResponseCallback done;
    std::chrono::steady_clock::time_point deadline;
  };

  int fd_;
  ClientOptions options_;
  proto::HandshakeResponse handshake_;
  std::atomic<bool> broken_{false};
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point last_expire_;  // reader thread only
  std::atomic<uint64_t> next_id_{1};
  std::mutex write_mu_;
  std::mutex pending_mu_;
  std::map<uint64_t, Pending> pending_;
  std::thread reader_;
};

// Holds a Connection and replaces it when it broke. Thread-safe.
class ConnectionHolder {
 public:
  explicit ConnectionHolder(ClientOptions options) : options_(std::move(options)) {}
  // The live connection, reconnecting if needed.
  absl::StatusOr<std::shared_ptr<Connection>> Get();
  const ClientOptions& options() const { return options_; }
  absl::StatusOr<proto::Response> Call(proto::Request req, int64_t extra_timeout_ms = 0);

 private:
  ClientOptions options_;
  std::mutex mu_;
  std::shared_ptr<Connection> conn_;
};

}  // namespace tokimq::client
