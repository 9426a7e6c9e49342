// HMAC and the helpers around it: the one home of the MAC code shared by the broker (native
// handshake proofs, the RocketMQ gRPC `authorization` header) and the C++ client.
//
// Implemented on OpenSSL's libcrypto (Debian libssl-dev): HMAC(3) with EVP_sha1 / EVP_sha256,
// CRYPTO_memcmp for the comparison. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tokimq {

// Raw MAC bytes (20 for SHA-1, 32 for SHA-256) of `data` under `key`.
std::string HmacSha1(std::string_view key, std::string_view data);
std::string HmacSha256(std::string_view key, std::string_view data);

// Lower-case hex of `bytes` (two characters per byte).
std::string HexEncode(std::string_view bytes);

// True when a == b, in time that depends only on the lengths (never on where the bytes
// differ), so a remote guesser learns nothing from response times. Different lengths: false.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// `n` bytes from the operating system's CSPRNG (RAND_bytes). Aborts if the generator fails:
// a predictable nonce would defeat its purpose.
std::string RandomBytes(size_t n);

}  // namespace tokimq
