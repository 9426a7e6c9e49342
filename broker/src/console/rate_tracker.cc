#include "console/rate_tracker.h"

namespace tokimq::broker::console {

std::map<std::string, double> RateTracker::Update(int64_t now_ms,
                                                  const std::map<std::string, int64_t>& counts) {
  if (samples_.empty() || now_ms - samples_.back().ms >= 1000) samples_.push_back({now_ms, counts});
  while (samples_.size() > 2 && samples_[1].ms <= now_ms - window_ms_) samples_.pop_front();
  std::map<std::string, double> rates;
  const Sample& base = samples_.front();
  const double seconds = static_cast<double>(now_ms - base.ms) / 1000.0;
  for (const auto& [name, count] : counts) {
    double rate = 0;
    if (seconds > 0) {
      auto it = base.counts.find(name);
      const int64_t before = it == base.counts.end() ? 0 : it->second;
      if (count >= before) rate = static_cast<double>(count - before) / seconds;
    }
    rates[name] = rate;
  }
  return rates;
}

}  // namespace tokimq::broker::console
