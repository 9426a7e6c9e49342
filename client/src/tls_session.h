// TlsSession: the client end of TLS over a connected socket (OpenSSL libssl), used by
// Connection when ClientOptions::tls is set (docs/security.md "TLS").
//
// Verifies the broker's certificate chain against `ca_file` (empty: the system's CAs) and its
// name against the host the client connected to. The socket is non-blocking from Connect on:
// Read never blocks (Connection polls the socket itself), WriteAll waits for room with poll.
// Thread-safety: OpenSSL's SSL object must not be read and written at once, so every call takes
// mu_; Connection's reader and writers may then run on different threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace tokimq::client {

class TlsSession {
 public:
  // Handshakes on `fd` within timeout_ms. kUnavailable with OpenSSL's reason on failure
  // (untrusted certificate, name mismatch, a broker that does not speak TLS).
  static absl::StatusOr<std::unique_ptr<TlsSession>> Connect(int fd, const std::string& host,
                                                             const std::string& ca_file,
                                                             int64_t timeout_ms);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Decrypted bytes are waiting (polling the socket would not see them).
  bool HasBuffered();
  // > 0: bytes read; 0: nothing yet (poll the socket); < 0: closed or failed (*error).
  ssize_t Read(char* buf, size_t cap, absl::Status* error);
  // All of data, waiting (poll) while the socket is full. kUnavailable on failure.
  absl::Status WriteAll(const char* data, size_t size);

 private:
  TlsSession(int fd, SSL_CTX* ctx, SSL* ssl) : fd_(fd), ctx_(ctx), ssl_(ssl) {}

  const int fd_;
  std::mutex mu_;
  SSL_CTX* ctx_;
  SSL* ssl_;
};

}  // namespace tokimq::client
