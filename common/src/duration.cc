#include "common/duration.h"

#include <ctime>
#include <limits>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace tokimq {
namespace {

constexpr int64_t kSecond = 1000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      fmt::format("invalid duration '{}': {} (use e.g. 250ms, 30s, 5m, 2h, 7d)", text, why));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads an unsigned decimal of at most `max_digits` digits at text[*pos].
bool ReadNumber(std::string_view text, size_t* pos, int64_t* out, size_t max_digits = 18) {
  size_t start = *pos;
  int64_t v = 0;
  while (*pos < text.size() && IsDigit(text[*pos])) {
    if (*pos - start >= max_digits) return false;
    v = v * 10 + (text[*pos] - '0');
    ++*pos;
  }
  *out = v;
  return *pos > start;
}

}  // namespace

absl::StatusOr<int64_t> ParseDuration(std::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  size_t pos = 0;
  int64_t total = 0;
  while (pos < text.size()) {
    int64_t n = 0;
    if (!ReadNumber(text, &pos, &n)) return Bad(text, "expected a number");
    size_t unit_start = pos;
    while (pos < text.size() && !IsDigit(text[pos])) ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    int64_t mult = 0;
    if (unit.empty() || unit == "ms") {
      mult = 1;
      // A bare integer (ms) only as the whole input: "5s3" is a typo, not 5003 ms.
      if (unit.empty() && total != 0) return Bad(text, "missing unit");
      if (unit.empty() && text.find_first_not_of("0123456789") != std::string_view::npos) {
        return Bad(text, "missing unit");
      }
    } else if (unit == "s") {
      mult = kSecond;
    } else if (unit == "m") {
      mult = kMinute;
    } else if (unit == "h") {
      mult = kHour;
    } else if (unit == "d") {
      mult = kDay;
    } else {
      return Bad(text, fmt::format("unknown unit '{}'", unit));
    }
    if (n > (std::numeric_limits<int64_t>::max() - total) / mult) return Bad(text, "too large");
    total += n * mult;
  }
  return total;
}

std::string FormatDuration(int64_t ms) {
  if (ms == 0) return "0ms";
  std::string out;
  // The magnitude as unsigned: -INT64_MIN does not fit an int64_t.
  uint64_t rest = static_cast<uint64_t>(ms);
  if (ms < 0) {
    out = "-";
    rest = 0 - rest;
  }
  const std::pair<uint64_t, const char*> units[] = {
      {kDay, "d"}, {kHour, "h"}, {kMinute, "m"}, {kSecond, "s"}, {1, "ms"}};
  for (const auto& [size, name] : units) {
    if (rest >= size) {
      out += fmt::format("{}{}", rest / size, name);
      rest %= size;
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseTimestamp(std::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(fmt::format(
        "invalid time '{}': use RFC 3339 UTC like 2026-12-01T10:00:00Z or ms since epoch", text));
  };
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos) {
    size_t pos = 0;
    int64_t v = 0;
    if (!ReadNumber(text, &pos, &v)) return bad();
    return v;
  }
  // YYYY-MM-DDTHH:MM:SS[.fff]Z
  size_t pos = 0;
  int64_t f[6] = {};
  const char seps[] = {'-', '-', 'T', ':', ':'};
  for (int i = 0; i < 6; ++i) {
    if (!ReadNumber(text, &pos, &f[i], i == 0 ? 4 : 2)) return bad();
    if (i < 5) {
      if (pos >= text.size()) return bad();
      char c = text[pos];
      if (c != seps[i] && !(i == 2 && (c == 't' || c == ' '))) return bad();
      ++pos;
    }
  }
  int64_t frac_ms = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < text.size() && IsDigit(text[pos])) {
      if (digits < 3) frac_ms = frac_ms * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (int d = digits; d < 3; ++d) frac_ms *= 10;
  }
  if (pos + 1 != text.size() || (text[pos] != 'Z' && text[pos] != 'z')) return bad();
  if (f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 60) {
    return bad();
  }
  // Days from civil (proleptic Gregorian), after H. Hinnant's public-domain algorithm.
  int64_t y = f[0] - (f[1] <= 2 ? 1 : 0);
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t mp = (f[1] + 9) % 12;
  int64_t doy = (153 * mp + 2) / 5 + f[2] - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = era * 146097 + doe - 719468;
  return ((days * 24 + f[3]) * 60 + f[4]) * 60 * 1000 + f[5] * 1000 + frac_ms;
}

std::string FormatTimestamp(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  int64_t frac = ms % 1000;
  if (frac < 0) {
    frac += 1000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

}  // namespace tokimq
