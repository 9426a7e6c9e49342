// The RocketMQ 5 gRPC request signature, checked by the gRPC endpoint on every RPC.
//
// Each request of an official client with sessionCredentials carries two headers:
//   x-mq-date-time: 20231227T194619Z                       (UTC, yyyyMMdd'T'HHmmss'Z')
//   authorization:  MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time,
//                   Signature=<hex of HMAC-SHA1(key = secret key, data = the x-mq-date-time value)>
// (RocketMQ's DefaultAuthenticationContextBuilder and AclSigner; the clients send upper-case
// hex, compared here case-insensitively). RocketMQ accepts any date; tokimq also refuses one
// more than kSignatureWindowMs away from the broker's clock, so a captured header stops
// working after 15 minutes (replay window). Every failure is kUnauthenticated with the same
// text ("authentication failed"): nothing tells a guesser which part was wrong.
//
// Pure functions over an AuthStore (which locks itself); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tokimq::broker::auth {

class AuthStore;

inline constexpr int64_t kSignatureWindowMs = 15 * 60 * 1000;

struct AuthorizationHeader {
  std::string access_key;     // Credential up to its first '/'
  std::string signature_hex;  // as sent (40 hex digits)
};

// The grammar above: scheme "MQv2-HMAC-SHA1", then comma-separated key=value items (spaces
// around items allowed) of which Credential and Signature are required and SignedHeaders, when
// present, must be x-mq-date-time. kInvalidArgument naming the defect (for tests and logs; the
// client only ever sees "authentication failed").
absl::StatusOr<AuthorizationHeader> ParseAuthorizationHeader(std::string_view header);

// "yyyyMMddTHHmmssZ" (UTC) -> ms since the Unix epoch. kInvalidArgument for any other shape or
// an impossible date.
absl::StatusOr<int64_t> ParseMqDateTime(std::string_view text);

// Checks both headers against the store at broker time now_ms: the parsed header, an enabled
// user, a date within kSignatureWindowMs of now_ms, and the HMAC (constant-time compare).
// Returns the access key, or kUnauthenticated("authentication failed"); *why (if given) gets
// the reason for the broker's log.
absl::StatusOr<std::string> VerifyRocketMqSignature(const AuthStore& store,
                                                    std::string_view authorization,
                                                    std::string_view date_time, int64_t now_ms,
                                                    std::string* why = nullptr);

}  // namespace tokimq::broker::auth
