// Dialing a broker: the TCP part of Connection::Open (connection_open.cc), before TLS and the
// handshake.
//
// Thread-safety: free functions without shared state; callable from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace tokimq::client {

// Splits "host:port" at the last ':'; an IPv6 host may be bracketed ("[::1]:10911", brackets
// removed). kInvalidArgument when there is no ':' or the host or port part is empty.
absl::StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& broker);

// A connected, blocking TCP socket (CLOEXEC, TCP_NODELAY) to `broker` ("host:port"), trying
// each resolved address in turn; the caller owns the descriptor. kInvalidArgument for a bad
// address, kUnavailable when the host does not resolve or nothing accepts, kDeadlineExceeded
// when the last address tried did not answer within timeout_ms (per address).
absl::StatusOr<int> DialTcp(const std::string& broker, int64_t timeout_ms);

// kUnavailable with "<what>: <strerror(errno)>".
absl::Status ErrnoUnavailable(const std::string& what);

}  // namespace tokimq::client
