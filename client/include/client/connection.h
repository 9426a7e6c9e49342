// Connection: one pipelined TCP connection to a tokimq broker (native protocol, docs/protocol.md).
//
// Many requests may be outstanding at once; each gets a fresh request id and its callback runs
// when the response with that id arrives, when its timeout passes (kDeadlineExceeded), or when
// the connection breaks (kUnavailable). A broken connection is not reused: Connection::Open
// makes a new one (the Client wrappers do this on the next call).
//
// Threads: Call/CallAsync may be used from any thread; writes are serialised by a mutex. Reading
// is a role held by one thread at a time (leader/follower): a thread blocked in Call reads the
// socket itself while no other thread does, and stops when its own response has arrived, so a
// synchronous call costs one wake-up instead of two (reader thread, then caller). Responses for
// other requests that it reads on the way are handed to their owners. The connection's own
// background thread takes the role only while CallAsync requests are outstanding and no caller
// holds it; otherwise it only watches for the broker closing the connection (POLLRDHUP), so that
// broken() turns true while idle and ConnectionHolder reconnects. Callbacks run on whichever
// thread read the response (the background thread or a thread inside Call on this connection);
// they must not block, and must not make a blocking Call on the same connection. The destructor
// fails outstanding calls (kCancelled or kUnavailable) and joins the background thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
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
  // Credentials for a broker started with --auth (docs/security.md). Sent only as an HMAC proof
  // over the broker's per-connection nonce, never in clear. Empty: no authentication (a broker
  // with auth on then refuses the connection with kUnauthenticated).
  std::string access_key;
  std::string secret_key;
  // TLS to a broker started with --tls-cert (docs/security.md "TLS"): the broker's certificate
  // must chain to tls_ca_file (PEM; empty: the system's CAs) and name the host of `broker`.
  bool tls = false;
  std::string tls_ca_file;
  // The name the broker's certificate must hold (DNS or IP subjectAltName), also sent as SNI;
  // empty: the host of `broker`. For peers reached by an address their certificate does not
  // name (a follower dialing its leader's advertised IP: docs/replication.md "TLS between
  // members").
  std::string tls_server_name;
  // RocketMQ's client namespace (docs/protocol.md "Namespaces"): the topics and groups this
  // client names are those of the namespace, separate from same-named ones elsewhere, and the
  // broker's answers name them without it. "": none. 1..64 characters of [A-Za-z0-9_-]; the
  // broker refuses the handshake (kInvalidArgument) for another.
  std::string namespace_;
};

using ResponseCallback = std::function<void(absl::StatusOr<proto::Response>)>;

class TlsSession;

class Connection {
 public:
  // Connects and performs the handshake, then authenticates when the broker asks for it.
  // kUnavailable if the broker cannot be reached, kFailedPrecondition if it refuses the
  // protocol version, kUnauthenticated if it requires credentials and they are missing or
  // wrong.
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
  // A synchronous caller's slot: filled (under pending_mu_) by whoever reads its response.
  struct SyncSlot {
    std::condition_variable cv;  // woken when done, and when the read role is handed to it
    std::atomic<bool> done{false};
    absl::StatusOr<proto::Response> result{absl::UnknownError("no response")};
  };
  struct Pending {
    ResponseCallback done;      // CallAsync
    SyncSlot* sync = nullptr;   // Call
    std::chrono::steady_clock::time_point deadline;
  };

  Connection(int fd, int wake_fd, ClientOptions options, std::unique_ptr<TlsSession> tls);
  // Registers `p` under a fresh id and writes the request. A non-OK result means nothing was
  // registered; a write failure after registering completes `p` (and every other call) instead.
  absl::Status Start(proto::Request req, int64_t timeout_ms, Pending p);
  void BackgroundLoop();
  // Read role (holder only): reads and dispatches responses until until() is true (checked
  // after each step), or the connection fails (the error is returned).
  absl::Status ReadUntil(const std::function<bool()>& until);
  // Read role: dispatches one buffered response, or reads more bytes.
  absl::Status PumpOnce();
  void Dispatch(proto::Response resp);
  // Gives the free read role to a waiting synchronous caller, else (async requests outstanding)
  // to the background thread. pending_mu_ held; reading_ false.
  void HandOffLocked();
  void Fail(const absl::Status& s);  // marks the connection broken and fails everything pending
  void FailAll(const absl::Status& s);
  void ExpireDeadlines();
  // Completes a removed entry; for a sync slot pending_mu_ must be held by the caller.
  static void CompleteSyncLocked(SyncSlot* slot, absl::StatusOr<proto::Response> r);
  void WakeBackground();
  // Reads what is available (at least 1 byte, at most `cap`) into `buf`, waiting for it; false
  // with *error when the connection fails or is closed. Expires deadlines while waiting.
  bool ReadSome(char* buf, size_t cap, size_t* got, absl::Status* error);

  int fd_;
  ClientOptions options_;
  std::unique_ptr<TlsSession> tls_;  // set when options_.tls
  proto::HandshakeResponse handshake_;
  std::atomic<bool> broken_{false};
  std::atomic<bool> stopping_{false};
  int wake_fd_;  // eventfd: wakes the background thread (async work, stop)
  std::atomic<uint64_t> next_id_{1};
  std::mutex write_mu_;
  std::mutex pending_mu_;
  std::map<uint64_t, Pending> pending_;      // pending_mu_
  std::atomic<size_t> async_pending_{0};     // CallAsync entries in pending_; written under pending_mu_
  bool reading_ = false;                     // pending_mu_: some thread holds the read role
  bool peer_closed_ = false;                 // pending_mu_: the broker closed (POLLRDHUP seen)
  // Read-role state (only the holder touches these).
  std::string rbuf_;
  size_t rbegin_ = 0, rend_ = 0;             // unparsed bytes: rbuf_[rbegin_, rend_)
  std::chrono::steady_clock::time_point last_expire_;
  std::thread background_;
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
