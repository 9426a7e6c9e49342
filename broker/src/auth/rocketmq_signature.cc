#include "broker/auth/rocketmq_signature.h"

#include <cctype>
#include <optional>

#include "broker/auth/auth_store.h"
#include "common/hmac.h"
#include "fmt/format.h"

namespace tokimq::broker::auth {
namespace {

constexpr std::string_view kScheme = "MQv2-HMAC-SHA1";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

}  // namespace

absl::StatusOr<AuthorizationHeader> ParseAuthorizationHeader(std::string_view header) {
  const size_t space = header.find(' ');
  if (space == std::string_view::npos || header.substr(0, space) != kScheme) {
    return absl::InvalidArgumentError("authorization: scheme is not MQv2-HMAC-SHA1");
  }
  AuthorizationHeader out;
  std::string_view rest = header.substr(space + 1);
  bool have_credential = false, have_signature = false;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(
          fmt::format("authorization: item '{}' is not key=value", item));
    }
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "Credential") {
      out.access_key = std::string(value.substr(0, value.find('/')));
      have_credential = !out.access_key.empty();
    } else if (key == "Signature") {
      out.signature_hex = std::string(value);
      have_signature = true;
    } else if (key == "SignedHeaders") {
      if (value != "x-mq-date-time") {
        return absl::InvalidArgumentError("authorization: SignedHeaders must be x-mq-date-time");
      }
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (!have_credential) return absl::InvalidArgumentError("authorization: no Credential");
  if (!have_signature) return absl::InvalidArgumentError("authorization: no Signature");
  if (out.signature_hex.size() != 40) {
    return absl::InvalidArgumentError("authorization: Signature is not 40 hex digits");
  }
  for (char c : out.signature_hex) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError("authorization: Signature is not 40 hex digits");
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseMqDateTime(std::string_view t) {
  const absl::Status bad = absl::InvalidArgumentError(
      fmt::format("x-mq-date-time '{}' is not yyyyMMddTHHmmssZ", t.substr(0, 32)));
  if (t.size() != 16 || t[8] != 'T' || t[15] != 'Z') return bad;
  auto num = [&](size_t pos, size_t len) -> std::optional<int64_t> {
    int64_t v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (t[i] < '0' || t[i] > '9') return std::nullopt;
      v = v * 10 + (t[i] - '0');
    }
    return v;
  };
  auto y = num(0, 4), mo = num(4, 2), d = num(6, 2), h = num(9, 2), mi = num(11, 2), s = num(13, 2);
  if (!y || !mo || !d || !h || !mi || !s) return bad;
  if (*mo < 1 || *mo > 12 || *d < 1 || *d > DaysInMonth(*y, *mo) || *h > 23 || *mi > 59 ||
      *s > 59) {
    return bad;
  }
  return ((DaysFromCivil(*y, *mo, *d) * 24 + *h) * 60 + *mi) * 60000 + *s * 1000;
}

absl::StatusOr<std::string> VerifyRocketMqSignature(const AuthStore& store,
                                                    std::string_view authorization,
                                                    std::string_view date_time, int64_t now_ms,
                                                    std::string* why) {
  const absl::Status failed = absl::UnauthenticatedError("authentication failed");
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return failed;
  };
  if (authorization.empty()) return fail("no authorization header");
  absl::StatusOr<AuthorizationHeader> header = ParseAuthorizationHeader(authorization);
  if (!header.ok()) return fail(std::string(header.status().message()));
  absl::StatusOr<int64_t> signed_ms = ParseMqDateTime(date_time);
  if (!signed_ms.ok()) return fail(std::string(signed_ms.status().message()));
  if (*signed_ms > now_ms + kSignatureWindowMs || *signed_ms < now_ms - kSignatureWindowMs) {
    return fail(
        fmt::format("x-mq-date-time {} is more than 15 min from the broker's clock", date_time));
  }
  std::optional<User> user = store.GetUser(header->access_key);
  // The MAC is computed for an unknown user too, so both cases take the same time.
  std::string expected = HexEncode(HmacSha1(user ? user->secret_key : std::string(), date_time));
  std::string sent = header->signature_hex;
  for (char& c : sent) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool match = ConstantTimeEquals(expected, sent);
  if (!user) return fail(fmt::format("unknown user '{}'", header->access_key));
  if (!user->enabled) return fail(fmt::format("user '{}' is disabled", header->access_key));
  if (!match) return fail(fmt::format("bad signature for user '{}'", header->access_key));
  return header->access_key;
}

}  // namespace tokimq::broker::auth
