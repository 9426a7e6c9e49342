// Logging goes through spdlog's default logger. Components log with TOKIMQ_LOG_* so that the
// broker can route and silence them in one place.
#pragma once

#include <spdlog/spdlog.h>

#define TOKIMQ_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define TOKIMQ_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define TOKIMQ_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
#define TOKIMQ_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
