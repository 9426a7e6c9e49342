// Decimal integer parsing: the one parser for integers written as text (property values,
// key parts, client-supplied numbers). Each takes the whole of `s`: no spaces, no '+', no
// trailing bytes; a value out of range is refused, never wrapped.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace tokimq {

// An optional '-' then decimal digits, in int64 range ("-0" is 0). False (and *out unchanged)
// otherwise.
bool ParseInt64(std::string_view s, int64_t* out);

// Decimal digits only (no sign, so "-0" is refused), in [0, INT64_MAX]. False (and *out
// unchanged) otherwise.
bool ParseNonNegativeInt64(std::string_view s, int64_t* out);

// Decimal digits only, in [0, UINT64_MAX]. False (and *out unchanged) otherwise.
bool ParseUint64(std::string_view s, uint64_t* out);

}  // namespace tokimq
