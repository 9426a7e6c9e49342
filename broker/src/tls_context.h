// The native server's TLS context (issue 17, docs/security.md "TLS").
#pragma once

#include <utility>  // before any boost/asio header (Boost 1.74 with C++20)

#include <boost/asio/ssl.hpp>

#include "absl/status/statusor.h"
#include "broker/server.h"

namespace tokimq::broker {

// TLS 1.2 or later with the certificate chain and private key files of `options` (PEM), read
// now. No session tickets: a client never gets a TLS record that carries no response.
// kInvalidArgument naming the file that cannot be used.
absl::StatusOr<boost::asio::ssl::context> MakeTlsContext(const ServerOptions& options);

}  // namespace tokimq::broker
