#include <string_view>

#include "common/parse_int.h"
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
  return ParseInt64(body.substr(0, a), deliver_ms) &&
         ParseUint64(body.substr(a + 1, b - a - 1), seq);
}

}  // namespace tokimq::bench
