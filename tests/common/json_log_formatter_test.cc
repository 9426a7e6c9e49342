#include "common/json_log_formatter.h"

#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>

#include <chrono>
#include <string>

namespace tokimq {
namespace {

std::string Format(std::string_view payload, spdlog::level::level_enum level) {
  spdlog::details::log_msg msg(spdlog::source_loc{}, "tokimq", level, payload);
  // 2026-12-01T23:05:01.123Z
  msg.time = spdlog::log_clock::time_point(std::chrono::milliseconds(1796166301123LL));
  msg.thread_id = 42;
  JsonLogFormatter f;
  spdlog::memory_buf_t out;
  f.format(msg, out);
  return std::string(out.data(), out.size());
}

TEST(JsonLogFormatterTest, WritesOneObjectPerLineWithUtcMillisecondTime) {
  EXPECT_EQ(Format("broker ready", spdlog::level::info),
            "{\"ts\":\"2026-12-01T23:05:01.123Z\",\"level\":\"info\",\"logger\":\"tokimq\","
            "\"thread\":42,\"msg\":\"broker ready\"}\n");
}

TEST(JsonLogFormatterTest, LevelNamesAreSpdlogs) {
  EXPECT_NE(Format("x", spdlog::level::warn).find("\"level\":\"warning\""), std::string::npos);
  EXPECT_NE(Format("x", spdlog::level::err).find("\"level\":\"error\""), std::string::npos);
}

TEST(JsonLogFormatterTest, EscapesQuotesBackslashesAndControlCharacters) {
  const std::string line = Format(std::string("a\"b\\c\nd\te\x01 f\x1f", 13), spdlog::level::info);
  EXPECT_NE(line.find("\"msg\":\"a\\\"b\\\\c\\nd\\te\\u0001 f\\u001f\"}"), std::string::npos)
      << line;
  // Exactly one newline: the terminator.
  EXPECT_EQ(line.find('\n'), line.size() - 1);
}

TEST(JsonLogFormatterTest, PassesUtf8Through) {
  const std::string line = Format("トピック", spdlog::level::info);
  EXPECT_NE(line.find("\"msg\":\"トピック\""), std::string::npos) << line;
}

TEST(JsonLogFormatterTest, CloneFormatsTheSame) {
  JsonLogFormatter f;
  auto copy = f.clone();
  spdlog::details::log_msg msg(spdlog::source_loc{}, "n", spdlog::level::info, "m");
  spdlog::memory_buf_t a, b;
  f.format(msg, a);
  copy->format(msg, b);
  EXPECT_EQ(std::string(a.data(), a.size()), std::string(b.data(), b.size()));
}

}  // namespace
}  // namespace tokimq
