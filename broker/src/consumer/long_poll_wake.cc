#include "consumer/long_poll_wake.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <functional>

namespace tokimq::consumer {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the futex word must be a plain 32-bit integer");

uint32_t* Word(const std::atomic<uint32_t>& a) {
  return const_cast<uint32_t*>(reinterpret_cast<const uint32_t*>(&a));
}

}  // namespace

size_t LongPollWake::Slot(std::string_view topic) {
  return std::hash<std::string_view>{}(topic) % kCounters;
}

uint64_t LongPollWake::TopicsCount(std::string_view topic, std::string_view retry) const {
  return counters_[Slot(topic)].load() + counters_[Slot(retry)].load();
}

LongPollWake::Seen LongPollWake::Observe(std::string_view topic, std::string_view retry) const {
  Seen s;
  s.seq = seq_.load();  // first the sequence, then the counters (class comment)
  s.topics = TopicsCount(topic, retry);
  return s;
}

bool LongPollWake::WaitAfter(Seen seen, std::string_view topic, std::string_view retry,
                             const Clock& clock, int64_t deadline_us,
                             const std::atomic<bool>& stop) const {
  while (true) {
    if (stop.load()) return true;
    const int64_t left_us = deadline_us - clock.NowMicros();
    if (left_us <= 0) return false;
    timespec ts{static_cast<time_t>(left_us / 1'000'000),
                static_cast<long>(left_us % 1'000'000 * 1000)};
    // Returns at once (EAGAIN) when the sequence moved since `seen.seq`; else sleeps until a
    // wake, the timeout (ETIMEDOUT) or a signal.
    const long rc = ::syscall(SYS_futex, Word(seq_), FUTEX_WAIT_PRIVATE, seen.seq, &ts, nullptr, 0);
    const bool slept_out = rc != 0 && errno == ETIMEDOUT;
    if (stop.load()) return true;
    const Seen now = Observe(topic, retry);
    if (now.topics != seen.topics) return true;
    // The whole time left has passed in real time: over, even if `clock` did not move.
    if (slept_out) return false;
    seen.seq = now.seq;  // other topics moved: sleep on
  }
}

void LongPollWake::Notify(std::string_view topic) {
  counters_[Slot(topic)].fetch_add(1);
  seq_.fetch_add(1);
  ::syscall(SYS_futex, Word(seq_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

void LongPollWake::WakeAll() {
  seq_.fetch_add(1);
  ::syscall(SYS_futex, Word(seq_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace tokimq::consumer
