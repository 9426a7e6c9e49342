#include "common/parse_int.h"

#include <charconv>
#include <system_error>

namespace tokimq {
namespace {

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

template <typename T>
bool FromChars(std::string_view s, T* out) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return false;
  *out = v;
  return true;
}

}  // namespace

bool ParseInt64(std::string_view s, int64_t* out) { return FromChars(s, out); }

bool ParseNonNegativeInt64(std::string_view s, int64_t* out) {
  return AllDigits(s) && FromChars(s, out);
}

bool ParseUint64(std::string_view s, uint64_t* out) { return AllDigits(s) && FromChars(s, out); }

}  // namespace tokimq
