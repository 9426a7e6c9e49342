// Human durations and timestamps for flags, config files and CLI output.
//
// Durations: a non-negative integer with a unit, optionally several concatenated:
// "250ms", "30s", "5m", "2h", "7d", "1h30m". A bare integer is milliseconds. Timestamps:
// RFC 3339 UTC "2026-12-01T10:00:00Z" (optional ".123" fraction) or integer ms since the epoch.
// Pure functions, thread-safe. (Formerly proto/duration.h, which still re-exports these in
// tokimq::wire.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tokimq {

// Milliseconds. kInvalidArgument on empty input, unknown unit, negative or overflowing value.
absl::StatusOr<int64_t> ParseDuration(std::string_view text);
// Shortest exact form: 0 -> "0ms", 90000 -> "1m30s", 604800000 -> "7d".
std::string FormatDuration(int64_t ms);
// Milliseconds since the Unix epoch. kInvalidArgument on anything else.
absl::StatusOr<int64_t> ParseTimestamp(std::string_view text);
// "2026-12-01T10:00:00.000Z".
std::string FormatTimestamp(int64_t ms);

}  // namespace tokimq
