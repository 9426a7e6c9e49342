// LongPollWake: how a Receive that found nothing waits for a message of its topic (or its
// group's retry topic), and how the thread that stored one wakes it, without a lock.
//
// Why no lock: the wake-up is called by whichever thread put the message — for a delayed
// message the timer's dequeue put thread, which runs at nice -10 or SCHED_FIFO so that it puts
// each message at its millisecond. With a mutex shared with the waiting request threads (nice
// 0), a waiter that was preempted while holding it stalled the timer's put: workload g on the
// loaded 2-core machine measured the dispatch listener taking up to 10-232 ms (p50 2 µs) inside
// the timer's PutBatch, and every message due behind it waited as long (docs/performance.md
// "Workload g"). Here the notifier does two atomic increments and one futex wake.
//
// How: a global 32-bit sequence the waiters sleep on (Linux futex), bumped on every
// notification, and 256 per-topic-hash counters that tell a woken waiter whether its topics
// changed (if not it sleeps again without rescanning; a hash collision only costs a rescan).
// Order: Notify bumps the topic counter, then the sequence; a waiter reads the sequence, then
// the counters, then scans; it sleeps only while the sequence still has the value it read, so
// a notification after its read of the counters always ends its sleep.
//
// Time: a wait's deadline is on the Clock it is given (the consumer service's), like every
// other time of the broker. A sleep that runs its whole timeout (the time left by that Clock)
// ends the wait even when the Clock did not move, so on a ManualClock that stands still a long
// poll still ends after its length of real time (longer only while other topics' notifications
// keep waking it).
//
// Thread-safety: every member may be called from any thread at once.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "common/clock.h"

namespace tokimq::consumer {

class LongPollWake {
 public:
  // What a waiter saw before its scan.
  struct Seen {
    uint32_t seq = 0;
    uint64_t topics = 0;  // sum of the counters of its topics
  };

  // The state now, for `topic` and `retry` (read before scanning them).
  Seen Observe(std::string_view topic, std::string_view retry) const;

  // Sleeps until a notification for `topic` or `retry` after `seen`, `*stop` set (then
  // WakeAll), or `deadline_us` (µs since the epoch on `clock`): each sleep lasts the time
  // left by `clock`, and one that runs its whole length also ends the wait (class comment).
  // Returns true when woken by a notification for its topics or a stop, false at the
  // deadline. May return true spuriously (a hash collision): the caller rescans. A clock
  // moved past the deadline during a sleep is seen at the next wake-up.
  bool WaitAfter(Seen seen, std::string_view topic, std::string_view retry, const Clock& clock,
                 int64_t deadline_us, const std::atomic<bool>& stop) const;

  // A message is readable in `topic` (or a FIFO group of it unblocked): wakes its waiters.
  // Lock-free; one futex wake system call.
  void Notify(std::string_view topic);

  // Wakes every waiter (after setting the `stop` flag they wait with).
  void WakeAll();

 private:
  static constexpr size_t kCounters = 256;
  static size_t Slot(std::string_view topic);
  uint64_t TopicsCount(std::string_view topic, std::string_view retry) const;

  std::atomic<uint32_t> seq_{0};  // the futex word
  std::array<std::atomic<uint64_t>, kCounters> counters_{};
};

}  // namespace tokimq::consumer
