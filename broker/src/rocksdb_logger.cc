#include "rocksdb_logger.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string_view>

#include "common/logging.h"

namespace tokimq::broker {
namespace {

class RocksDbLogger final : public rocksdb::Logger {
 public:
  RocksDbLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    const bool loud =
        level >= rocksdb::InfoLogLevel::WARN_LEVEL && level != rocksdb::InfoLogLevel::HEADER_LEVEL;
    if (!loud && !spdlog::should_log(spdlog::level::debug)) return;  // no formatting cost
    char buf[1024];
    va_list copy;
    va_copy(copy, ap);
    const int n = std::vsnprintf(buf, sizeof(buf), format, copy);
    va_end(copy);
    if (n < 0) return;
    const std::string_view line(buf, std::min<size_t>(static_cast<size_t>(n), sizeof(buf) - 1));
    if (level == rocksdb::InfoLogLevel::WARN_LEVEL) {
      TOKIMQ_LOG_WARN("rocksdb: {}", line);
    } else if (loud) {
      TOKIMQ_LOG_ERROR("rocksdb: {}", line);
    } else {
      TOKIMQ_LOG_DEBUG("rocksdb: {}", line);
    }
  }
};

}  // namespace

std::shared_ptr<rocksdb::Logger> NewRocksDbLogger() { return std::make_shared<RocksDbLogger>(); }

}  // namespace tokimq::broker
