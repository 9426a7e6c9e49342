#include <charconv>
#include <string_view>

#include "drivers.h"

namespace tokimq::bench {

std::string MakeBody(int64_t deliver_ms, uint64_t seq, size_t body_size) {
  std::string b = std::to_string(deliver_ms) + ":" + std::to_string(seq) + ":";
  if (b.size() < body_size) b.append(body_size - b.size(), 'x');
  return b;
}

bool ParseBody(std::string_view body, int64_t* deliver_ms, uint64_t* seq) {
  size_t a = body.find(':');
  if (a == std::string_view::npos) return false;
  size_t b = body.find(':', a + 1);
  if (b == std::string_view::npos) return false;
  auto r1 = std::from_chars(body.data(), body.data() + a, *deliver_ms);
  auto r2 = std::from_chars(body.data() + a + 1, body.data() + b, *seq);
  return r1.ec == std::errc() && r1.ptr == body.data() + a && r2.ec == std::errc() &&
         r2.ptr == body.data() + b;
}

}  // namespace tokimq::bench
