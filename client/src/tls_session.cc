#include "tls_session.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <chrono>

#include "common/clock.h"
#include "fmt/format.h"

namespace tokimq::client {
namespace {

std::string OpenSslError(const char* what) {
  const unsigned long e = ERR_get_error();
  char buf[256] = {};
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return fmt::format("TLS {}: {}", what, e != 0 ? buf : "connection closed or refused");
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsSession>> TlsSession::Connect(int fd, const std::string& host,
                                                                const std::string& ca_file,
                                                                int64_t timeout_ms) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return absl::InternalError(OpenSslError("context"));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const int loaded = ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                     : SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  if (loaded != 1) {
    absl::Status s = absl::InvalidArgumentError(OpenSslError(("CA file " + ca_file).c_str()));
    SSL_CTX_free(ctx);
    return s;
  }
  SSL* ssl = SSL_new(ctx);
  std::unique_ptr<TlsSession> session(new TlsSession(fd, ctx, ssl));
  if (ssl == nullptr) return absl::InternalError(OpenSslError("session"));
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_tlsext_host_name(ssl, host.c_str());
  SSL_set1_host(ssl, host.c_str());  // name check: DNS name or IP address of the certificate
  SSL_set_fd(ssl, fd);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  const auto deadline = RealTimeDeadline(std::chrono::milliseconds(timeout_ms));
  while (true) {
    const int rc = SSL_connect(ssl);
    if (rc == 1) break;
    const int err = SSL_get_error(ssl, rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      const long verify = SSL_get_verify_result(ssl);
      if (verify != X509_V_OK) {
        ERR_clear_error();
        return absl::UnavailableError(fmt::format("TLS handshake with {}: certificate: {}", host,
                                                  X509_verify_cert_error_string(verify)));
      }
      return absl::UnavailableError(OpenSslError(("handshake with " + host).c_str()));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - RealTimeDeadline(std::chrono::milliseconds(0)));
    if (left.count() <= 0)
      return absl::DeadlineExceededError("TLS handshake with " + host + " timed out");
    pollfd p{fd, static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
  return session;
}

TlsSession::~TlsSession() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  SSL_CTX_free(ctx_);
}

bool TlsSession::HasBuffered() {
  std::lock_guard<std::mutex> lock(mu_);
  return SSL_pending(ssl_) > 0;
}

ssize_t TlsSession::Read(char* buf, size_t cap, absl::Status* error) {
  std::lock_guard<std::mutex> lock(mu_);
  const int n = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(cap, 1 << 30)));
  if (n > 0) return n;
  const int err = SSL_get_error(ssl_, n);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return 0;
  *error = err == SSL_ERROR_ZERO_RETURN ? absl::UnavailableError("broker closed the TLS connection")
                                        : absl::UnavailableError(OpenSslError("read"));
  return -1;
}

absl::Status TlsSession::WriteAll(const char* data, size_t size) {
  size_t off = 0;
  while (off < size) {
    int n = 0, err = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = SSL_write(ssl_, data + off, static_cast<int>(std::min<size_t>(size - off, 1 << 30)));
      if (n <= 0) err = SSL_get_error(ssl_, n);
    }
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ) {
      return absl::UnavailableError(OpenSslError("write"));
    }
    pollfd p{fd_, static_cast<short>(err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN), 0};
    ::poll(&p, 1, 100);
  }
  return absl::OkStatus();
}

}  // namespace tokimq::client
