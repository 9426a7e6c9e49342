// RateTracker: per-name rates (per second) from successive samples of counts that only grow
// (a topic's messages_sent, the timer's delivered counter), for the console's send and
// release rates.
//
// A sample is kept at most once a second (calls in between are answered, not kept); the rate of a name is (count now - count in the
// oldest kept sample) / the seconds between them, where the oldest kept sample is the newest
// one at least window_ms old (so, once warmed up, rates are averages over window_ms to
// window_ms + 1 s). A name absent from that sample counts from 0 there (a new topic); a count
// that went down (the broker restarted: the counters are in memory) rates 0.
// Memory: one map of counts per kept sample (window_ms / 1 s + 2 samples at most).
// Thread-safety: none; the console guards it with a mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

namespace tokimq::broker::console {

class RateTracker {
 public:
  explicit RateTracker(int64_t window_ms = 10'000) : window_ms_(window_ms) {}

  // Records `counts` at now_ms (ms, any monotonic time base) and returns each name's rate per
  // second; 0 for every name on the first call.
  std::map<std::string, double> Update(int64_t now_ms, const std::map<std::string, int64_t>& counts);

 private:
  struct Sample {
    int64_t ms = 0;
    std::map<std::string, int64_t> counts;
  };
  int64_t window_ms_;
  std::deque<Sample> samples_;
};

}  // namespace tokimq::broker::console
