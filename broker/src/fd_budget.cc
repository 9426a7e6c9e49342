#include "broker/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <limits>

#include "fmt/format.h"

namespace tokimq::broker {
namespace {

constexpr uint64_t kRaiseCap = uint64_t{1} << 20;

uint64_t FromRlim(rlim_t v) {
  return v == RLIM_INFINITY ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
}

}  // namespace

NoFileLimit CurrentNoFileLimit() {
  NoFileLimit out;
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    out.soft = FromRlim(rl.rlim_cur);
    out.hard = FromRlim(rl.rlim_max);
  }
  return out;
}

NoFileLimit RaiseNoFileLimit() {
  NoFileLimit now = CurrentNoFileLimit();
  const uint64_t target = std::min(now.hard, kRaiseCap);
  if (now.soft >= target) return now;
  struct rlimit rl;
  rl.rlim_cur = static_cast<rlim_t>(target);
  rl.rlim_max = now.hard == std::numeric_limits<uint64_t>::max() ? RLIM_INFINITY
                                                                 : static_cast<rlim_t>(now.hard);
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return now;
  NoFileLimit raised = CurrentNoFileLimit();
  raised.raised_from = now.soft;
  return raised;
}

size_t MaxOpenFilesFor(uint64_t nofile) {
  const uint64_t left = nofile > kReservedDescriptors ? nofile - kReservedDescriptors : 0;
  return static_cast<size_t>(
      std::clamp<uint64_t>(left / 2, kMinAutoOpenFiles, kMaxAutoOpenFiles));
}

size_t ClampMaxOpenFiles(size_t configured, uint64_t nofile) {
  const uint64_t left = nofile > kReservedDescriptors ? nofile - kReservedDescriptors : 0;
  const uint64_t cap = std::max<uint64_t>(left / 4 * 3, kMinAutoOpenFiles);
  return static_cast<size_t>(std::min<uint64_t>(configured, cap));
}

std::string DescribeBudget(const NoFileLimit& limit, size_t max_open_files) {
  const std::string raised =
      limit.raised_from != 0 ? fmt::format(" (raised from {})", limit.raised_from) : "";
  const uint64_t used = kReservedDescriptors + max_open_files;
  const uint64_t left = limit.soft > used ? limit.soft - used : 0;
  std::string warn;
  if (limit.soft <= used) {
    warn = fmt::format(
        "; WARNING: max_open_files {} leaves no descriptors for connections and segments, "
        "lower it or raise the limit",
        max_open_files);
  }
  return fmt::format(
      "file descriptors: limit {}{}, hard {}; ConsumeQueue file cache holds {} files ({} topics "
      "of 8 queues without reopening); {} left for connections and CommitLog/TimerLog "
      "segments{}",
      limit.soft, raised, limit.hard, max_open_files, max_open_files / 8, left, warn);
}

}  // namespace tokimq::broker
