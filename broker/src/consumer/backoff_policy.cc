#include "consumer/backoff_policy.h"

#include <algorithm>

namespace tokimq::consumer {

int64_t BackoffMs(const GroupPolicy& policy, int failed_attempt) {
  int i = failed_attempt < 1 ? 0 : failed_attempt - 1;
  if (!policy.backoff_ms.empty()) {
    size_t idx = std::min<size_t>(static_cast<size_t>(i), policy.backoff_ms.size() - 1);
    return std::max<int64_t>(0, policy.backoff_ms[idx]);
  }
  constexpr int64_t kTable[] = {10'000, 30'000, 60'000, 120'000};
  constexpr int64_t kHour = 3'600'000;
  if (i < 4) return kTable[i];
  int shift = std::min(i - 3, 20);  // 4 min, 8 min, ... capped
  return std::min<int64_t>(kTable[3] << shift, kHour);
}

}  // namespace tokimq::consumer
