// The native protocol's authentication proof (docs/protocol.md "Authentication"): what the
// client sends in AuthenticateRequest.signature and what the broker recomputes.
//
//   proof = HMAC-SHA256(key = secret key, data = auth_nonce ++ client_id)
//
// auth_nonce: the 32 random bytes of this connection's HandshakeResponse; client_id: the
// HandshakeRequest's. A fresh nonce per connection, valid for one attempt, makes a recorded
// proof useless on any other connection (replay). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tokimq::wire {

inline constexpr size_t kAuthNonceBytes = 32;

// 32 raw bytes.
std::string AuthProof(std::string_view secret_key, std::string_view nonce,
                      std::string_view client_id);

}  // namespace tokimq::wire
