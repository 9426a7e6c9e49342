#include "tls_context.h"

#include "fmt/format.h"

namespace tokimq::broker {

absl::StatusOr<TlsMode> ParseTlsMode(const std::string& text) {
  if (text == "disabled") return TlsMode::kDisabled;
  if (text == "permissive") return TlsMode::kPermissive;
  if (text == "enforcing") return TlsMode::kEnforcing;
  return absl::InvalidArgumentError(
      fmt::format("TLS mode '{}' is not disabled, permissive or enforcing", text));
}

const char* TlsModeName(TlsMode mode) {
  switch (mode) {
    case TlsMode::kDisabled:
      return "disabled";
    case TlsMode::kPermissive:
      return "permissive";
    case TlsMode::kEnforcing:
      return "enforcing";
  }
  return "?";
}

absl::StatusOr<boost::asio::ssl::context> MakeTlsContext(const ServerOptions& options) {
  boost::asio::ssl::context ctx(boost::asio::ssl::context::tls_server);
  ctx.set_options(boost::asio::ssl::context::default_workarounds |
                  boost::asio::ssl::context::no_sslv2 | boost::asio::ssl::context::no_sslv3 |
                  boost::asio::ssl::context::no_tlsv1 | boost::asio::ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  ctx.use_certificate_chain_file(options.tls_cert_file, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("TLS certificate {}: {}", options.tls_cert_file, ec.message()));
  }
  ctx.use_private_key_file(options.tls_key_file, boost::asio::ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("TLS key {}: {}", options.tls_key_file, ec.message()));
  }
  // No session tickets: a client then never sees a TLS record that carries no response.
  SSL_CTX_set_num_tickets(ctx.native_handle(), 0);
  return ctx;
}

}  // namespace tokimq::broker
