// JsonLogFormatter: an spdlog formatter that writes one JSON object per log line, for log
// shippers (journald + Loki / Elasticsearch / Vector) that want fields instead of a pattern.
//
// Shape (one line, keys always in this order):
//   {"ts":"2026-12-01T23:05:01.123Z","level":"info","logger":"tokimq","thread":1234,"msg":"..."}
// - ts: UTC, millisecond precision, RFC 3339.
// - level: spdlog's level name (trace, debug, info, warning, error, critical).
// - msg: the formatted message, escaped as RFC 8259 requires (", \, and control characters
//   below 0x20 as \n, \t, ... or \u00XX). Bytes >= 0x80 are passed through: tokimq's messages
//   are UTF-8 (names are validated); a stray invalid byte is not repaired.
// Used by tokimq-broker's `--log-format json` (TOML `log_format = "json"`).
// Thread-safety: spdlog clones the formatter per sink and calls it under the sink's lock.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string_view>

namespace tokimq {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

// Appends `s` to `dest` as the inside of a JSON string (no surrounding quotes).
void AppendJsonEscaped(std::string_view s, spdlog::memory_buf_t& dest);

}  // namespace tokimq
