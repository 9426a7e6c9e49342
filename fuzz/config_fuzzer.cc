// Fuzz target: the broker's TOML config loader (broker/config.h, docs/configuration.md).
//
// The input is the text of a config file.
// Properties: loading never throws (toml++ errors stop at the loader) and every error is
// kInvalidArgument; a config that loads has every value within its documented range, and
// written back as canonical TOML (every key, durations as integer ms) it loads onto a default
// config to the same BrokerConfig.
#include <cstdint>
#include <string>

#include "broker/config.h"
#include "fmt/format.h"
#include "fuzz_check.h"

namespace tokimq::broker {
namespace {

// A TOML basic string: quotes, backslashes and control bytes escaped; the rest is the loaded
// (valid UTF-8) text as it is.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\u{:04X}", u);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string Write(const BrokerConfig& c) {
  const BrokerOptions& b = c.broker;
  const ServerOptions& s = c.server;
  std::string t;
  t += fmt::format("data_dir = {}\n", Quote(b.data_dir));
  t += fmt::format("bind = {}\n", Quote(s.bind_address));
  t += fmt::format("port = {}\n", s.port);
  t += fmt::format("port_file = {}\n", Quote(c.port_file));
  t += fmt::format("log_level = {}\n", Quote(c.log_level));
  t += fmt::format("log_file = {}\n", Quote(c.log_file));
  t += fmt::format("io_threads = {}\n", s.io_threads);
  t += fmt::format("worker_threads = {}\n", s.worker_threads);
  t += fmt::format("max_frame_bytes = {}\n", s.max_frame_bytes);
  t += fmt::format("manual_clock = {}\n", b.manual_clock ? "true" : "false");
  t += fmt::format("flush = {}\n", b.flush_mode == FlushMode::kSync ? "\"sync\"" : "\"async\"");
  t += fmt::format("async_flush_interval = {}\n", b.async_flush_interval_ms);
  t += fmt::format("segment_size = {}\n", b.commitlog_segment_size);
  t += fmt::format("max_message_size = {}\n", b.max_message_size);
  t += fmt::format("timer_precision = {}\n", b.timer_precision_ms);
  t += fmt::format("timer_thread_nice = {}\n", b.timer_thread_nice);
  t += fmt::format("timer_window = {}\n", b.timer_window_ms);
  t += fmt::format("retention = {}\n", b.default_retention_ms);
  t += fmt::format("retention_interval = {}\n", b.retention_interval_ms);
  t += fmt::format("max_long_poll = {}\n", b.max_long_poll_ms);
  for (const auto& [name, p] : b.group_policies) {
    t += fmt::format("[group.{}]\n", Quote(name));
    t += fmt::format("max_attempts = {}\n", p.max_attempts);
    t += fmt::format("ttl = {}\n", p.ttl_ms);
    t += "backoff = [";
    for (size_t i = 0; i < p.backoff_ms.size(); ++i) {
      t += fmt::format("{}{}", i ? ", " : "", p.backoff_ms[i]);
    }
    t += "]\n";
  }
  return t;
}

bool Same(const BrokerConfig& x, const BrokerConfig& y) {
  const BrokerOptions& a = x.broker;
  const BrokerOptions& b = y.broker;
  if (a.group_policies.size() != b.group_policies.size()) return false;
  for (auto i = a.group_policies.begin(), j = b.group_policies.begin();
       i != a.group_policies.end(); ++i, ++j) {
    if (i->first != j->first || i->second.max_attempts != j->second.max_attempts ||
        i->second.ttl_ms != j->second.ttl_ms || i->second.backoff_ms != j->second.backoff_ms) {
      return false;
    }
  }
  return a.data_dir == b.data_dir && a.manual_clock == b.manual_clock &&
         a.flush_mode == b.flush_mode && a.async_flush_interval_ms == b.async_flush_interval_ms &&
         a.commitlog_segment_size == b.commitlog_segment_size &&
         a.max_message_size == b.max_message_size && a.timer_precision_ms == b.timer_precision_ms &&
         a.timer_thread_nice == b.timer_thread_nice && a.timer_window_ms == b.timer_window_ms &&
         a.default_retention_ms == b.default_retention_ms &&
         a.retention_interval_ms == b.retention_interval_ms &&
         a.max_long_poll_ms == b.max_long_poll_ms &&
         x.server.bind_address == y.server.bind_address && x.server.port == y.server.port &&
         x.server.max_frame_bytes == y.server.max_frame_bytes &&
         x.server.io_threads == y.server.io_threads &&
         x.server.worker_threads == y.server.worker_threads && x.log_level == y.log_level &&
         x.log_file == y.log_file && x.port_file == y.port_file;
}

void CheckRanges(const BrokerConfig& c) {
  const BrokerOptions& b = c.broker;
  FUZZ_CHECK(c.server.io_threads >= 1 && c.server.io_threads <= 64);
  FUZZ_CHECK(c.server.worker_threads >= 1 && c.server.worker_threads <= 1024);
  FUZZ_CHECK(c.server.max_frame_bytes >= 1024 && c.server.max_frame_bytes <= (1u << 30));
  FUZZ_CHECK(b.commitlog_segment_size >= 4096 && b.commitlog_segment_size <= (uint64_t{1} << 40));
  FUZZ_CHECK(b.max_message_size >= 1 && b.max_message_size <= (64u << 20));
  FUZZ_CHECK(b.timer_thread_nice >= -20 && b.timer_thread_nice <= 19);
  for (int64_t v : {b.async_flush_interval_ms, b.timer_precision_ms, b.timer_window_ms,
                    b.default_retention_ms, b.retention_interval_ms, b.max_long_poll_ms}) {
    FUZZ_CHECK(v >= 0);
  }
  for (const auto& [name, p] : b.group_policies) {
    FUZZ_CHECK(p.max_attempts >= 1 && p.max_attempts <= 1000);
    FUZZ_CHECK(p.ttl_ms >= 0);
    for (int64_t v : p.backoff_ms) FUZZ_CHECK(v >= 0);
  }
}

}  // namespace
}  // namespace tokimq::broker

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq::broker;
  const std::string text(reinterpret_cast<const char*>(data), size);
  BrokerConfig c;
  absl::Status s = LoadConfigText(text, &c);
  if (!s.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(s));
    return 0;
  }
  CheckRanges(c);
  const std::string canonical = Write(c);
  BrokerConfig back;
  absl::Status again = LoadConfigText(canonical, &back);
  if (!again.ok()) {
    std::fprintf(stderr, "canonical config refused: %s\n%s\n", std::string(again.message()).c_str(),
                 canonical.c_str());
  }
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(Same(c, back));
  return 0;
}
