#include "common/json_log_formatter.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>

namespace tokimq {

void AppendJsonEscaped(std::string_view s, spdlog::memory_buf_t& dest) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': dest.append(std::string_view("\\\"")); break;
      case '\\': dest.append(std::string_view("\\\\")); break;
      case '\n': dest.append(std::string_view("\\n")); break;
      case '\r': dest.append(std::string_view("\\r")); break;
      case '\t': dest.append(std::string_view("\\t")); break;
      case '\b': dest.append(std::string_view("\\b")); break;
      case '\f': dest.append(std::string_view("\\f")); break;
      default:
        if (c < 0x20) {
          const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          dest.append(esc, esc + sizeof(esc));
        } else {
          dest.push_back(ch);
        }
    }
  }
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  using namespace std::chrono;
  const auto since_epoch = msg.time.time_since_epoch();
  const auto secs = duration_cast<seconds>(since_epoch);
  const auto millis = duration_cast<milliseconds>(since_epoch - secs).count();
  const std::time_t t = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&t, &tm);
  fmt::format_to(std::back_inserter(dest),
                 "{{\"ts\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\",\"level\":\"",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, millis);
  const auto level = spdlog::level::to_string_view(msg.level);
  dest.append(level.data(), level.data() + level.size());
  dest.append(std::string_view("\",\"logger\":\""));
  AppendJsonEscaped(std::string_view(msg.logger_name.data(), msg.logger_name.size()), dest);
  fmt::format_to(std::back_inserter(dest), "\",\"thread\":{},\"msg\":\"", msg.thread_id);
  AppendJsonEscaped(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  dest.append(std::string_view("\"}\n"));
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace tokimq
